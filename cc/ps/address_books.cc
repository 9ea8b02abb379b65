#include "cc/ps/address_books.h"

#include <set>
#include <string>

#include "cc/transport/address.h"

namespace bps {
namespace {

std::string HostOf(const std::string& address) {
  auto parsed = ParseHostPort(address);
  return parsed.ok() ? parsed.value().host : address;
}

// Slices pay off where partitions cross a TCP network: not when every node is on one host (memory-bound,
// whole partitions need fewer messages), not over RDMA (no head-of-line blocking behind bulk data).
size_t ChooseSliceBytes(const Config& config, const JobMembership& members) {
  if (config.rdma()) return 0;
  std::set<std::string> hosts;
  for (PeerId server : members.servers()) hosts.insert(HostOf(members.Find(server)->address));
  for (const auto& worker : members.workers()) hosts.insert(HostOf(members.Find(worker.second)->address));
  return hosts.size() > 1 ? config.slice_bytes : 0;
}

// Worker processes advertising the same host as `address`.
int WorkersOnHost(const JobMembership& members, const std::string& address) {
  const std::string host = HostOf(address);
  int count = 0;
  for (const auto& worker : members.workers()) count += HostOf(members.Find(worker.second)->address) == host ? 1 : 0;
  return count;
}

}  // namespace

AddressBook JobAddressBook(const Config& config, const JobMembership& members) {
  AddressBook book;
  book.num_workers = members.worker_processes();
  book.generation = members.generation();
  book.local_size = members.local_size();
  book.slice_bytes = ChooseSliceBytes(config, members);
  for (PeerId server : members.servers()) book.servers.push_back(members.Find(server)->address);
  for (const auto& worker : members.workers()) book.worker_tokens.push_back(members.Find(worker.second)->token);
  return book;
}

AddressBook AddressBookFor(const AddressBook& job, const JobMembership& members, PeerId peer) {
  const JobMembership::Member& member = *members.Find(peer);
  AddressBook book = job;
  book.your_rank = member.rank;
  if (member.role == Role::kServer) {
    book.workers_on_your_host = WorkersOnHost(members, member.address);
  } else {
    book.worker_tokens.clear();  // a worker learns its own token only
    book.your_token = member.token;
  }
  return book;
}

}  // namespace bps

#include "cc/ps/server_generation.h"

#include <algorithm>

#include "cc/common/tokens.h"

namespace bps {

bool ServerGeneration::Start(const AddressBook& book) {
  const bool first = generation_ == 0;
  generation_ = book.generation;
  num_workers_ = book.num_workers;
  local_size_ = std::max(1, book.local_size);
  tokens_ = book.worker_tokens;
  // A new generation's workers prove their new ranks anew (its keys come after this book).
  rank_of_.clear();
  peer_of_.clear();
  dropped_ = false;
  return first;
}

Status ServerGeneration::Identify(PeerId from, int rank, const std::string& token) {
  auto speaks = rank_of_.find(from);
  if (speaks != rank_of_.end()) {
    return FailedPrecondition("this connection already speaks for worker " + std::to_string(speaks->second));
  }
  if (rank < 0 || rank >= static_cast<int>(tokens_.size()) || !ConstantTimeEquals(token, tokens_[rank])) {
    return Unauthenticated("the scheduler did not give this process the place of worker " + std::to_string(rank));
  }
  if (peer_of_.count(rank)) return FailedPrecondition("worker " + std::to_string(rank) + " is already connected");
  rank_of_[from] = rank;
  peer_of_[rank] = from;
  return Status::OK();
}

std::optional<int> ServerGeneration::RankOf(PeerId from) const {
  auto it = rank_of_.find(from);
  if (it == rank_of_.end()) return std::nullopt;
  return it->second;
}

void ServerGeneration::Forget(PeerId peer) {
  auto identified = rank_of_.find(peer);
  if (identified == rank_of_.end()) return;
  peer_of_.erase(identified->second);
  rank_of_.erase(identified);
}

void ServerGeneration::WorkerFinished(int rank, bool joined) {
  finished_.insert(rank);
  if (joined) joined_.insert(rank);
}

std::set<int> ServerGeneration::ContributorsAmong(const KeySpec& spec, const std::set<int>& workers) const {
  if (spec.scope != TensorScope::kMachine) {
    std::set<int> indices;
    for (int rank : workers) {
      const int index = ContributionIndex(spec.scope, spec.members, spec.root, rank, local_size_);
      if (index >= 0) indices.insert(index);
    }
    return indices;
  }
  std::map<int, int> per_machine;
  for (int rank : workers) ++per_machine[rank / local_size_];
  std::set<int> machines;
  for (const auto& entry : per_machine) {
    if (entry.second == local_size_) machines.insert(entry.first);
  }
  return machines;
}

std::set<int> ServerGeneration::FinishedContributors(const KeySpec& spec) const {
  return ContributorsAmong(spec, finished_);
}

std::set<int> ServerGeneration::JoinedContributors(const KeySpec& spec) const {
  if (spec.scope == TensorScope::kPublished) return {};  // a publisher that joined publishes nothing
  return ContributorsAmong(spec, joined_);
}

std::set<PeerId> ServerGeneration::End(bool dropped) {
  dropped_ = dropped;
  finished_.clear();
  joined_.clear();
  std::set<PeerId> identified;
  for (const auto& entry : rank_of_) identified.insert(entry.first);
  return identified;
}

}  // namespace bps

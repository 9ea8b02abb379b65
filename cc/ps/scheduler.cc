#include "cc/ps/scheduler.h"

#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/common/rank_list.h"
#include "cc/ps/node_setup.h"
#include "cc/transport/address.h"

namespace bps {
namespace {

std::string Seconds(double s) {
  std::ostringstream out;
  out << s << " s";
  return out.str();
}

}  // namespace

Scheduler::Scheduler(const Config& config, Transport* transport)
    : config_(config), transport_(transport), planner_(config.num_server, config.partition_bytes) {}

Status Scheduler::Run() {
  transport_->SetHandler(this);
  auto bound = transport_->Listen(config_.root_uri, config_.root_port);
  if (!bound.ok()) {
    return Status(bound.status().code(), bound.status().message() +
                                             " (DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT must be an address of this "
                                             "machine and a free port)");
  }
  BPS_LOG(Info) << "scheduler listening on " << bound.value();
  std::unique_lock<std::mutex> lock(mu_);
  start_time_ = NowSeconds();
  while (!done_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (!done_ && !pending_abort_.ok() && NowSeconds() >= pending_abort_at_) Abort(pending_abort_);
    if (!done_) CheckTimeouts();
  }
  return result_;
}

void Scheduler::Send(PeerId to, const Message& m) { transport_->Send(to, m.Encode(), nullptr, 0, nullptr); }

std::string Scheduler::NodeName(PeerId peer) {
  auto it = nodes_.find(peer);
  if (it == nodes_.end()) return "an unregistered node (" + transport_->PeerName(peer) + ")";
  const Node& n = it->second;
  std::string rank = n.rank >= 0 ? " " + std::to_string(n.rank) : "";
  return std::string(RoleName(n.role)) + rank + " (" + n.address + ")";
}

void Scheduler::OnMessage(PeerId from, const std::string& header, void*, size_t) {
  auto decoded = Message::Decode(header);
  if (!decoded.ok()) {
    BPS_LOG(Warning) << "scheduler dropped a message from " << transport_->PeerName(from) << ": "
                     << decoded.status().ToString();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  const Message& m = decoded.value();
  switch (m.type) {
    case MessageType::kRegister: HandleRegister(from, m); break;
    case MessageType::kDeclare: HandleDeclare(from, m); break;
    case MessageType::kFinish: HandleFinish(from); break;
    case MessageType::kServerReady: HandleServerReady(from); break;
    default:
      BPS_LOG(Warning) << "scheduler ignored " << MessageTypeName(m.type) << " from " << NodeName(from);
  }
}

void Scheduler::HandleRegister(PeerId from, const Message& m) {
  auto body = RegisterBody::Decode(m.text);
  if (!body.ok()) return Abort(body.status());
  const RegisterBody& b = body.value();
  Node node{static_cast<Role>(b.role), -1, b.address};
  std::string who = std::string(RoleName(node.role)) + " at " + b.address;
  nodes_[from] = node;  // before any check, so that an abort reaches this node too
  if (b.num_worker != config_.num_worker || b.num_server != config_.num_server) {
    return Abort(InvalidArgument(who + " has DMLC_NUM_WORKER=" + std::to_string(b.num_worker) +
                                 " DMLC_NUM_SERVER=" + std::to_string(b.num_server) + " but the scheduler has " +
                                 std::to_string(config_.num_worker) + " and " + std::to_string(config_.num_server) +
                                 ": every process of a job needs the same values."));
  }
  if (started_) return Abort(FailedPrecondition(who + " registered after the job started."));
  if (node.role == Role::kServer) {
    if (static_cast<int>(servers_.size()) >= config_.num_server) {
      return Abort(InvalidArgument("more servers registered than DMLC_NUM_SERVER=" +
                                   std::to_string(config_.num_server) + " (the extra one is " + who + ")."));
    }
    servers_.push_back(from);
  } else if (node.role == Role::kWorker) {
    if (local_size_ == 0) local_size_ = b.local_size;
    if (b.local_size != local_size_) {
      return Abort(InvalidArgument(who + " has BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                                   " but another worker has " + std::to_string(local_size_) + "."));
    }
    node.rank = b.worker_id * b.local_size + b.local_rank;
    if (workers_.count(node.rank)) {
      return Abort(InvalidArgument("two workers registered with DMLC_WORKER_ID=" + std::to_string(b.worker_id) +
                                   " BYTEPS_LOCAL_RANK=" + std::to_string(b.local_rank) + " (" +
                                   nodes_[workers_[node.rank]].address + " and " + b.address +
                                   "): give each worker machine its own DMLC_WORKER_ID."));
    }
    workers_[node.rank] = from;
    nodes_[from].rank = node.rank;
  } else {
    return Abort(InvalidArgument("a scheduler registered with the scheduler (" + b.address + ")."));
  }
  if (local_size_ > 0 && static_cast<int>(servers_.size()) == config_.num_server &&
      static_cast<int>(workers_.size()) == expected_workers()) {
    SendAddressBooks();
  }
}

// Slices pay off where partitions cross a TCP network: not when every node is on one host (memory-bound,
// whole partitions need fewer messages), not over RDMA (no head-of-line blocking behind bulk data).
size_t Scheduler::ChooseSliceBytes() {
  if (UcxOptionsFor(config_, ProcessEnvironment()).eager != EagerPayloads::kBetweenHosts) return 0;
  std::set<std::string> hosts;
  for (const auto& entry : nodes_) {
    if (entry.second.role != Role::kScheduler) hosts.insert(HostOf(entry.second.address));
  }
  return hosts.size() > 1 ? config_.slice_bytes : 0;
}

std::string Scheduler::HostOf(const std::string& address) {
  auto parsed = ParseHostPort(address);
  return parsed.ok() ? parsed.value().host : address;
}

int Scheduler::WorkersOnHostOf(PeerId node) {
  const std::string host = HostOf(nodes_[node].address);
  int count = 0;
  for (const auto& worker : workers_) count += HostOf(nodes_[worker.second].address) == host ? 1 : 0;
  return count;
}

void Scheduler::SendAddressBooks() {
  started_ = true;
  AddressBook book;
  book.num_workers = expected_workers();
  book.local_size = local_size_;
  book.slice_bytes = ChooseSliceBytes();
  planner_.set_slice_bytes(book.slice_bytes);
  BPS_LOG(Info) << (book.slice_bytes ? "partitions cross the network in slices of " + std::to_string(book.slice_bytes) +
                                           " bytes"
                                     : std::string("partitions cross the network whole"));
  for (size_t i = 0; i < servers_.size(); ++i) {
    nodes_[servers_[i]].rank = static_cast<int>(i);
    book.servers.push_back(nodes_[servers_[i]].address);
  }
  address_book_ = book;
  // Servers first: a worker may push as soon as it has its book, so every server must know the job by then.
  for (PeerId server : servers_) SendAddressBook(server);
}

void Scheduler::SendAddressBook(PeerId to) {
  address_book_.your_rank = nodes_[to].rank;
  address_book_.workers_on_your_host = nodes_[to].role == Role::kServer ? WorkersOnHostOf(to) : 0;
  Message m;
  m.type = MessageType::kAddressBook;
  m.text = address_book_.Encode();
  Send(to, m);
}

void Scheduler::HandleServerReady(PeerId from) {
  auto it = nodes_.find(from);
  if (it == nodes_.end() || it->second.role != Role::kServer) return;
  ready_servers_.insert(from);
  if (static_cast<int>(ready_servers_.size()) < config_.num_server) return;
  for (auto& worker : workers_) SendAddressBook(worker.second);
  BPS_LOG(Info) << "job started: " << servers_.size() << " servers, " << workers_.size() << " workers";
}

void Scheduler::HandleDeclare(PeerId from, const Message& m) {
  auto it = nodes_.find(from);
  if (it == nodes_.end() || it->second.role != Role::kWorker || !started_) {
    return Abort(FailedPrecondition("DECLARE from " + NodeName(from) + " before the job started"));
  }
  auto spec = TensorSpec::Decode(m.text);
  if (!spec.ok()) return Abort(spec.status());
  const int rank = it->second.rank;
  Declaration& d = declarations_[spec.value().name];
  if (d.first_rank < 0) {
    d.spec = spec.value();
    d.first_rank = rank;
    d.first_seen = NowSeconds();
  }
  d.waiting[rank] = {from, m.request_id};
  if (d.error.ok() && !(spec.value() == d.spec)) {
    d.error = InvalidArgument("tensor '" + d.spec.name + "': worker " + std::to_string(d.first_rank) +
                              " declared it as " + d.spec.ToString() + " but worker " + std::to_string(rank) +
                              " as " + spec.value().ToString() +
                              "; every worker must push_pull the same tensors with the same shapes and dtypes.");
  }
  const int participant = participant_of(d.spec, rank);
  auto twice = d.declared.find(participant);
  if (d.error.ok() && twice != d.declared.end() && twice->second != rank) {
    d.error = InvalidArgument("tensor '" + d.spec.name + "' is pushed once per worker machine, but workers " +
                              std::to_string(twice->second) + " and " + std::to_string(rank) +
                              " of machine " + std::to_string(participant) + " both pushed it.");
    // The other machines may already hold the plan: only ending the job tells every worker.
    if (d.planned) return Abort(d.error);
  }
  d.declared[participant] = rank;
  if (d.error.ok() && !d.planned && static_cast<int>(d.declared.size()) == expected_participants(d.spec)) {
    uint64_t base = TensorKeyBase(d.spec.name);
    auto owner = key_owner_.find(base);
    if (owner != key_owner_.end() && owner->second != d.spec.name) {
      d.error = InvalidArgument("tensor names '" + owner->second + "' and '" + d.spec.name +
                                "' hash to the same key; rename one of them.");
    } else {
      auto plan = planner_.Plan(d.spec);
      if (plan.ok()) {
        key_owner_[base] = d.spec.name;
        d.plan = plan.value();
        d.planned = true;
      } else {
        d.error = plan.status();
      }
    }
  }
  AnswerDeclaration(d);
}

// Replies to every worker waiting on this declaration, once it is planned or has failed.
void Scheduler::AnswerDeclaration(Declaration& d) {
  if (d.error.ok() && !d.planned) return;
  Message reply;
  reply.type = MessageType::kDeclareReply;
  if (d.error.ok()) {
    reply.text = d.plan.Encode();
  } else {
    reply.set_status(d.error);
  }
  for (auto& waiter : d.waiting) {
    reply.request_id = waiter.second.second;
    Send(waiter.second.first, reply);
  }
  d.waiting.clear();
}

void Scheduler::HandleFinish(PeerId from) {
  auto it = nodes_.find(from);
  if (it == nodes_.end() || it->second.role != Role::kWorker) return;
  finished_.insert(it->second.rank);
  if (static_cast<int>(finished_.size()) < expected_workers()) return;
  Message bye;
  bye.type = MessageType::kShutdown;
  for (auto& entry : nodes_) Send(entry.first, bye);
  done_ = true;
  result_ = Status::OK();
  cv_.notify_all();
}

void Scheduler::CheckTimeouts() {
  const double now = NowSeconds();
  const std::string limit = "BYTEPS_TIMEOUT=" + Seconds(config_.timeout_s);
  if (!started_ && now - start_time_ > config_.timeout_s) {
    return Abort(DeadlineExceeded(
        "only " + std::to_string(servers_.size()) + " of " + std::to_string(config_.num_server) + " servers and " +
        std::to_string(workers_.size()) + " of " + std::to_string(config_.num_worker) +
        " worker machines registered within " + limit +
        "; check that every process was started with the same DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT."));
  }
  for (auto& entry : declarations_) {
    Declaration& d = entry.second;
    if (d.planned || !d.error.ok() || now - d.first_seen < config_.timeout_s) continue;
    std::set<int> missing, present;
    for (int p = 0; p < expected_participants(d.spec); ++p) (d.declared.count(p) ? present : missing).insert(p);
    const std::string who = d.spec.scope == TensorScope::kMachine ? "worker machine(s) " : "worker(s) ";
    d.error = DeadlineExceeded("tensor '" + d.spec.name + "' was pushed by " + who + RankList(present) +
                               " but not by " + who + RankList(missing) + " within " + limit +
                               "; every worker must push_pull the same tensors.");
    AnswerDeclaration(d);
  }
}

void Scheduler::OnPeerLost(PeerId peer, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  auto it = nodes_.find(peer);
  if (it == nodes_.end()) return;  // never registered: nothing depends on it
  if (it->second.role == Role::kWorker && finished_.count(it->second.rank)) return;  // done, may leave
  Status lost = Unavailable(NodeName(peer) + " exited or lost its connection (" + why.message() + ").");
  if (it->second.role == Role::kWorker) {
    // A worker often exits because a server died; wait a moment so the abort names the server instead.
    if (pending_abort_.ok()) {
      pending_abort_ = lost;
      pending_abort_at_ = NowSeconds() + kRootCauseWaitSeconds;
    }
    return;
  }
  Abort(lost);
}

void Scheduler::Abort(const Status& why) {
  BPS_LOG(Error) << "aborting the job: " << why.message();
  Message abort;
  abort.type = MessageType::kAbort;
  abort.set_status(why);
  for (auto& entry : nodes_) Send(entry.first, abort);
  done_ = true;
  result_ = why;
  cv_.notify_all();
}

}  // namespace bps

#include "cc/ps/scheduler.h"

#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/common/tokens.h"
#include "cc/common/rank_list.h"
#include "cc/compress/codec.h"
#include "cc/transport/address.h"

namespace bps {
namespace {

constexpr size_t kTokenBytes = 32;
constexpr size_t kTurnedAwayRemembered = 5;

// Contribution indices as the ranks (or machine ids) behind them.
std::set<int> ContributorRanks(const TensorSpec& spec, const std::set<int>& indices) {
  std::set<int> ranks;
  for (int index : indices) ranks.insert(ContributorRank(spec.scope, spec.members, spec.root, index));
  return ranks;
}

std::string Seconds(double s) {
  std::ostringstream out;
  out << s << " s";
  return out.str();
}

}  // namespace

Scheduler::Scheduler(const Config& config, Transport* transport)
    : config_(config),
      transport_(transport),
      planner_(std::make_unique<PartitionPlanner>(config.num_server, config.partition_bytes)) {}

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

void Scheduler::SendToServers(const Message& m) {
  const std::string bytes = m.Encode();
  for (PeerId server : servers_) transport_->Send(server, bytes, nullptr, 0, nullptr);
}

std::string Scheduler::NodeName(PeerId peer) {
  auto it = nodes_.find(peer);
  if (it == nodes_.end()) return "an unregistered process (" + transport_->PeerName(peer) + ")";
  const Node& n = it->second;
  std::string rank = n.rank >= 0 ? " " + std::to_string(n.rank) : "";
  return std::string(RoleName(n.role)) + rank + " (" + n.address + ")";
}

void Scheduler::OnMessage(PeerId from, const std::string& header, void*, size_t) {
  auto decoded = Message::Decode(header);
  if (!decoded.ok()) {
    dropped_.Warn("scheduler dropped a malformed message from " + transport_->PeerName(from));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  const Message& m = decoded.value();
  auto it = nodes_.find(from);
  if (it == nodes_.end()) {
    if (m.type == MessageType::kRegister) return HandleRegister(from, m);
  } else if (it->second.role == Role::kWorker) {
    switch (m.type) {
      case MessageType::kDeclare: return HandleDeclare(from, it->second, m);
      case MessageType::kFinish: return HandleFinish(it->second, m.text == kJoinedMark);
      case MessageType::kAbortRequest:
        return Abort(Aborted(NodeName(from) + " failed: " + Printable(m.text, 4000)));
      default: break;
    }
  } else if (it->second.role == Role::kServer) {
    switch (m.type) {
      case MessageType::kServerReady: return HandleServerReady(from);
      case MessageType::kKeyPlanReply: return HandleKeyPlanReply(from, m);
      case MessageType::kResetReply: return HandleResetReply(from);
      default: break;
    }
  }
  dropped_.Warn(std::string("scheduler dropped ") + MessageTypeName(m.type) + " from " + NodeName(from) +
                ": not a message that process sends");
}

Status Scheduler::CheckRegistration(const RegisterBody& b, const std::string& who) const {
  if (b.num_worker != config_.num_worker || b.num_server != config_.num_server) {
    return InvalidArgument(who + " has DMLC_NUM_WORKER=" + std::to_string(b.num_worker) + " DMLC_NUM_SERVER=" +
                           std::to_string(b.num_server) + " but the scheduler has " +
                           std::to_string(config_.num_worker) + " and " + std::to_string(config_.num_server) +
                           ": every process of a job needs the same values.");
  }
  if (started_) {
    return FailedPrecondition(who + " registered after the job started: every place in the job is taken (a "
                                    "second start of a worker, or a process of another job on the same port?).");
  }
  if (b.role == static_cast<int32_t>(Role::kServer)) {
    if (static_cast<int>(servers_.size()) >= config_.num_server) {
      return InvalidArgument("more servers registered than DMLC_NUM_SERVER=" + std::to_string(config_.num_server) +
                             " (the extra one is " + who + ").");
    }
    return Status::OK();
  }
  if (b.role != static_cast<int32_t>(Role::kWorker)) {
    return InvalidArgument(who + " registered with DMLC_ROLE=scheduler: only workers and servers join a job.");
  }
  if (b.local_size < 1 || b.local_size > 1024 || b.local_rank < 0 || b.local_rank >= b.local_size ||
      b.worker_id < 0 || b.worker_id >= config_.num_worker) {
    return InvalidArgument(who + " has DMLC_WORKER_ID=" + std::to_string(b.worker_id) + " BYTEPS_LOCAL_RANK=" +
                           std::to_string(b.local_rank) + " BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           ", outside the job's ranges.");
  }
  if (local_size_ > 0 && b.local_size != local_size_) {
    return InvalidArgument(who + " has BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           " but another worker has " + std::to_string(local_size_) + ".");
  }
  const int rank = b.worker_id * b.local_size + b.local_rank;
  auto taken = workers_.find(rank);
  if (taken != workers_.end()) {
    return InvalidArgument("two workers registered with DMLC_WORKER_ID=" + std::to_string(b.worker_id) +
                           " BYTEPS_LOCAL_RANK=" + std::to_string(b.local_rank) + " (" +
                           nodes_.at(taken->second).address + " first, then " + b.address +
                           "): give each worker machine its own DMLC_WORKER_ID.");
  }
  return Status::OK();
}

// A registration that does not fit the job: that process learns why and stops; the job goes on.
void Scheduler::Reject(PeerId from, const std::string& who, const Status& why) {
  dropped_.Warn("turned away " + who + ": " + why.message());
  turned_away_.push_back(why.message());
  if (turned_away_.size() > kTurnedAwayRemembered) turned_away_.pop_front();
  Message reply;
  reply.type = MessageType::kAddressBook;
  reply.set_status(why);
  Send(from, reply);
}

void Scheduler::HandleRegister(PeerId from, const Message& m) {
  auto body = RegisterBody::Decode(m.text);
  const std::string peer = transport_->PeerName(from);
  if (!body.ok()) return Reject(from, "a process at " + peer, body.status());
  const RegisterBody& b = body.value();
  auto listening = ParseHostPort(b.address);
  const bool plain = listening.ok() && !listening.value().host.empty() &&
                     listening.value().host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                              "0123456789.-") == std::string::npos;
  if (!plain) {
    return Reject(from, "a process at " + peer, InvalidArgument("its address '" + Printable(b.address) +
                                                               "' is not host:port"));
  }
  const bool server = b.role == static_cast<int32_t>(Role::kServer);
  const std::string who = std::string(server ? "server" : b.role == 2 ? "worker" : "a process") + " at " + b.address;
  Status fits = CheckRegistration(b, who);
  if (!fits.ok()) return Reject(from, who, fits);
  Node node{static_cast<Role>(b.role), -1, b.address};
  if (server) {
    servers_.push_back(from);
  } else {
    if (local_size_ == 0) local_size_ = b.local_size;
    node.rank = b.worker_id * b.local_size + b.local_rank;
    node.token = RandomBytes(kTokenBytes);
    workers_[node.rank] = from;
  }
  nodes_[from] = node;
  if (local_size_ > 0 && static_cast<int>(servers_.size()) == config_.num_server &&
      static_cast<int>(workers_.size()) == expected_workers()) {
    SendAddressBooks();
  }
}

// Slices pay off where partitions cross a TCP network: not when every node is on one host (memory-bound,
// whole partitions need fewer messages), not over RDMA (no head-of-line blocking behind bulk data).
size_t Scheduler::ChooseSliceBytes() {
  if (config_.rdma()) return 0;
  std::set<std::string> hosts;
  for (const auto& entry : nodes_) hosts.insert(HostOf(entry.second.address));
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
  planner_->set_slice_bytes(book.slice_bytes);
  BPS_LOG(Info) << (book.slice_bytes ? "partitions cross the network in slices of " + std::to_string(book.slice_bytes) +
                                           " bytes"
                                     : std::string("partitions cross the network whole"));
  for (size_t i = 0; i < servers_.size(); ++i) {
    nodes_[servers_[i]].rank = static_cast<int>(i);
    book.servers.push_back(nodes_[servers_[i]].address);
  }
  for (const auto& worker : workers_) book.worker_tokens.push_back(nodes_[worker.second].token);
  address_book_ = book;
  // Servers first: a worker may push as soon as it has its book, so every server must know the job by then.
  for (PeerId server : servers_) SendAddressBook(server);
}

void Scheduler::SendAddressBook(PeerId to) {
  const Node& node = nodes_[to];
  AddressBook book = address_book_;
  book.your_rank = node.rank;
  if (node.role == Role::kServer) {
    book.workers_on_your_host = WorkersOnHostOf(to);
  } else {
    book.worker_tokens.clear();  // a worker learns its own token only
    book.your_token = node.token;
  }
  Message m;
  m.type = MessageType::kAddressBook;
  m.text = book.Encode();
  Send(to, m);
}

void Scheduler::HandleServerReady(PeerId from) {
  if (!started_ || !ready_servers_.insert(from).second) return;
  if (static_cast<int>(ready_servers_.size()) < config_.num_server) return;
  for (auto& worker : workers_) SendAddressBook(worker.second);
  BPS_LOG(Info) << "job started: " << servers_.size() << " servers, " << workers_.size() << " workers";
}

std::set<int> Scheduler::FinishedParticipants(const TensorSpec& spec) const {
  return ParticipantsWhere(spec, [](const Node& node) { return node.part == Part::kFinished || node.part == Part::kLeft; });
}

std::set<int> Scheduler::JoinedParticipants(const TensorSpec& spec) const {
  if (spec.scope == TensorScope::kPublished) return {};
  return ParticipantsWhere(spec, [](const Node& node) { return node.part == Part::kFinished && node.joined; });
}

std::set<int> Scheduler::ParticipantsWhere(const TensorSpec& spec, const std::function<bool(const Node&)>& test) const {
  std::set<int> found;
  std::map<int, int> per_machine;
  for (const auto& worker : workers_) {
    if (!test(nodes_.at(worker.second))) continue;
    const int index = participant_of(spec, worker.first);
    if (index >= 0 && spec.scope != TensorScope::kMachine) found.insert(index);
    ++per_machine[worker.first / local_size_];
  }
  if (spec.scope != TensorScope::kMachine) return found;
  std::set<int> machines;  // a machine counts once all of its processes do
  for (const auto& entry : per_machine) {
    if (entry.second == local_size_) machines.insert(entry.first);
  }
  return machines;
}

Status Scheduler::CheckAgainstJob(const TensorSpec& spec) const {
  const int workers = expected_workers();
  if (!spec.members.empty() && spec.members.back() >= workers) {
    return InvalidArgument("tensor '" + spec.name + "': its process set names rank " +
                           std::to_string(spec.members.back()) + " in a job of " + std::to_string(workers) +
                           " worker processes");
  }
  if (spec.scope == TensorScope::kPublished && spec.root >= workers) {
    return InvalidArgument("tensor '" + spec.name + "' is published by rank " + std::to_string(spec.root) +
                           " in a job of " + std::to_string(workers) + " worker processes");
  }
  return Status::OK();
}

void Scheduler::HandleDeclare(PeerId from, const Node& node, const Message& m) {
  auto spec = TensorSpec::Decode(m.text);
  Status valid = spec.ok() ? spec.value().Validate() : spec.status();
  if (valid.ok()) valid = CheckAgainstJob(spec.value());
  if (valid.ok() && participant_of(spec.value(), node.rank) == kOutsider) {
    valid = InvalidArgument("tensor '" + spec.value().name + "' belongs to a process set without worker " +
                            std::to_string(node.rank) + " (" + spec.value().ToString() + ")");
  }
  if (valid.ok() && (!started_ || ready_servers_.size() < servers_.size() || !resetting_.empty() ||
                     node.part == Part::kFinished)) {
    valid = FailedPrecondition("a declaration outside a generation: the job has not started, or this worker "
                               "already finished");
  }
  if (!valid.ok()) {
    Message reply;
    reply.type = MessageType::kDeclareReply;
    reply.request_id = m.request_id;
    reply.set_status(valid);
    return Send(from, reply);
  }
  const int rank = node.rank;
  nodes_[from].part = Part::kActive;  // an idle worker starts the generation with its first declaration
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
  if (participant == kReader) {  // a published tensor's reader waits for the publisher's declaration
    if (d.error.ok() && !d.planned && FinishedParticipants(d.spec).count(0)) {
      d.error = FailedPrecondition("tensor '" + d.spec.name + "' is published by worker " +
                                   std::to_string(d.spec.root) + ", which finished without publishing it.");
    }
    return AnswerDeclaration(d);
  }
  auto twice = d.declared.find(participant);
  if (d.error.ok() && twice != d.declared.end() && twice->second != rank) {
    d.error = InvalidArgument("tensor '" + d.spec.name + "' is pushed once per worker machine, but workers " +
                              std::to_string(twice->second) + " and " + std::to_string(rank) +
                              " of machine " + std::to_string(participant) + " both pushed it.");
    // The other machines may already hold the plan: only ending the job tells every worker.
    if (d.planned) return Abort(d.error);
  }
  d.declared[participant] = rank;
  PlanIfComplete(d);
  AnswerDeclaration(d);
}

void Scheduler::PlanIfComplete(Declaration& d) {
  if (!d.error.ok() || d.planned || d.plan_request != 0) return;
  std::set<int> covered = JoinedParticipants(d.spec);
  for (const auto& entry : d.declared) covered.insert(entry.first);
  std::set<int> gone;
  for (int participant : FinishedParticipants(d.spec)) {
    if (!covered.count(participant)) gone.insert(participant);
  }
  if (!gone.empty()) {
    d.error = FailedPrecondition("tensor '" + d.spec.name + "' cannot be summed: worker(s) " +
                                 RankList(ContributorRanks(d.spec, gone)) +
                                 " finished (called shutdown() or exited) without pushing it.");
    return;
  }
  if (static_cast<int>(covered.size()) == expected_participants(d.spec)) Plan(d);
}

// Makes the tensor's plan and tells each server holding a key what to expect; the workers get the plan
// once every such server confirmed, so no push reaches a server that cannot check it.
void Scheduler::Plan(Declaration& d) {
  uint64_t base = TensorKeyBase(d.spec.name);
  auto owner = key_owner_.find(base);
  if (owner != key_owner_.end() && owner->second != d.spec.name) {
    d.error = InvalidArgument("tensor names '" + owner->second + "' and '" + d.spec.name +
                              "' hash to the same key; rename one of them.");
    return;
  }
  auto plan = planner_->Plan(d.spec);
  if (!plan.ok()) {
    d.error = plan.status();
    return;
  }
  key_owner_[base] = d.spec.name;
  d.plan = plan.value();
  std::map<int, KeyPlanBody> by_server;
  const int participants = expected_participants(d.spec);
  for (const Partition& p : d.plan.partitions) {
    if (d.spec.compression.on() && p.count > kMaxCodecElements) {
      d.error = InvalidArgument("tensor '" + d.spec.name + "': a compressed partition holds at most " +
                                std::to_string(kMaxCodecElements) + " elements; lower BYTEPS_PARTITION_BYTES");
      return;
    }
    by_server[p.server].keys.push_back(KeySpec{p.key, d.spec.dtype, p.count, participants, d.spec.scope, d.spec.op,
                                               d.spec.members, d.spec.root, d.spec.compression});
  }
  d.plan_request = next_plan_request_++;
  plan_requests_[d.plan_request] = d.spec.name;
  for (auto& entry : by_server) {
    Message m;
    m.type = MessageType::kKeyPlan;
    m.request_id = d.plan_request;
    m.text = entry.second.Encode();
    d.unacknowledged.insert(servers_[entry.first]);
    Send(servers_[entry.first], m);
  }
  if (d.unacknowledged.empty()) d.planned = true;  // an empty tensor: nothing to place
}

void Scheduler::HandleKeyPlanReply(PeerId from, const Message& m) {
  auto request = plan_requests_.find(m.request_id);
  if (request == plan_requests_.end()) return;
  Declaration& d = declarations_[request->second];
  if (d.plan_request != m.request_id || !d.unacknowledged.erase(from)) return;
  if (!m.status().ok() && d.error.ok()) {
    d.error = Status(m.status().code(), "tensor '" + d.spec.name + "': " + NodeName(from) + " could not take its "
                                            "keys: " + m.status().message());
  }
  if (!d.unacknowledged.empty()) return;
  plan_requests_.erase(request);
  if (d.error.ok()) d.planned = true;
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

void Scheduler::ReviewWaitingDeclarations() {
  for (auto& entry : declarations_) {
    Declaration& d = entry.second;
    if (d.waiting.empty()) continue;
    PlanIfComplete(d);
    AnswerDeclaration(d);
  }
}

void Scheduler::AnnounceFinished(int rank, bool joined) {
  Message finished;
  finished.type = MessageType::kWorkerFinished;
  finished.sender = rank;
  if (joined) finished.text = kJoinedMark;
  SendToServers(finished);
  ReviewWaitingDeclarations();
}

void Scheduler::HandleFinish(Node& node, bool joined) {
  if (node.part == Part::kFinished || !resetting_.empty()) return;
  node.part = Part::kFinished;
  node.joined = joined;
  last_finished_ = node.rank;
  AnnounceFinished(node.rank, joined);
  EndGenerationIfAllFinished();
}

void Scheduler::EndGenerationIfAllFinished() {
  bool any_finished = false;
  for (const auto& worker : workers_) {
    const Part part = nodes_[worker.second].part;
    if (part == Part::kActive || part == Part::kIdle) return;
    any_finished |= part == Part::kFinished;
  }
  if (!any_finished) return;
  // The servers forget this generation's keys before anyone may start the next.
  Message reset;
  reset.type = MessageType::kReset;
  resetting_ = std::set<PeerId>(servers_.begin(), servers_.end());
  SendToServers(reset);
}

bool Scheduler::AllLeft() const {
  for (const auto& worker : workers_) {
    if (nodes_.at(worker.second).part != Part::kLeft) return false;
  }
  return true;
}

void Scheduler::HandleResetReply(PeerId from) {
  if (!resetting_.erase(from) || !resetting_.empty()) return;
  declarations_.clear();
  plan_requests_.clear();
  key_owner_.clear();
  planner_ = std::make_unique<PartitionPlanner>(config_.num_server, config_.partition_bytes);
  planner_->set_slice_bytes(address_book_.slice_bytes);
  BPS_LOG(Info) << "generation " << generation_++ << " ended: every worker finished";
  Message done;
  done.type = MessageType::kGenerationDone;
  done.sender = last_finished_;
  for (auto& worker : workers_) {
    Node& node = nodes_[worker.second];
    if (node.part == Part::kLeft) continue;
    node.part = Part::kIdle;
    node.joined = false;
    Send(worker.second, done);
  }
  if (AllLeft()) EndJob();
}

void Scheduler::CheckTimeouts() {
  const double now = NowSeconds();
  const std::string limit = "BYTEPS_TIMEOUT=" + Seconds(config_.timeout_s);
  if (!started_ && now - start_time_ > config_.timeout_s) {
    std::string turned_away;
    for (const std::string& why : turned_away_) turned_away += " Turned away: " + why;
    return Abort(DeadlineExceeded(
        "only " + std::to_string(servers_.size()) + " of " + std::to_string(config_.num_server) + " servers and " +
        std::to_string(workers_.size()) + " worker processes registered within " + limit +
        "; check that every process was started with the same DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT and job secret." +
        turned_away));
  }
  for (auto& entry : declarations_) {
    Declaration& d = entry.second;
    if (d.planned || !d.error.ok() || d.plan_request != 0 || now - d.first_seen < config_.timeout_s) continue;
    if (d.spec.scope == TensorScope::kPublished) {
      d.error = DeadlineExceeded("tensor '" + d.spec.name + "' is published by worker " + std::to_string(d.spec.root) +
                                 ", which did not publish it within " + limit + ".");
      AnswerDeclaration(d);
      continue;
    }
    std::set<int> missing, present;
    for (int p = 0; p < expected_participants(d.spec); ++p) (d.declared.count(p) ? present : missing).insert(p);
    const std::string who = d.spec.scope == TensorScope::kMachine ? "worker machine(s) " : "worker(s) ";
    d.error = DeadlineExceeded("tensor '" + d.spec.name + "' was pushed by " + who +
                               RankList(ContributorRanks(d.spec, present)) + " but not by " + who +
                               RankList(ContributorRanks(d.spec, missing)) + " within " + limit +
                               "; every worker must push_pull the same tensors.");
    AnswerDeclaration(d);
  }
}

void Scheduler::OnPeerLost(PeerId peer, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  auto it = nodes_.find(peer);
  if (it == nodes_.end()) return;  // never registered: nothing depends on it
  Node& node = it->second;
  if (node.role == Role::kWorker && (node.part == Part::kFinished || node.part == Part::kIdle)) {
    // Finished, then gone: a process that is done. Whoever waits on it in a generation it did not start
    // learns so at once.
    const bool idle = node.part == Part::kIdle;
    node.part = Part::kLeft;
    if (!resetting_.empty()) return;  // the job ends once the generation is closed
    if (idle) AnnounceFinished(node.rank, false);
    if (AllLeft()) return EndJob();
    return EndGenerationIfAllFinished();
  }
  Status lost = Unavailable(NodeName(peer) + " exited or lost its connection (" + why.message() + ").");
  if (node.role == Role::kWorker) {
    // A worker often exits because a server died; wait a moment so the abort names the server instead.
    if (pending_abort_.ok()) {
      pending_abort_ = lost;
      pending_abort_at_ = NowSeconds() + kRootCauseWaitSeconds;
    }
    return;
  }
  Abort(lost);
}

// Every worker finished and left: the servers may go.
void Scheduler::EndJob() {
  Message bye;
  bye.type = MessageType::kShutdown;
  SendToServers(bye);
  done_ = true;
  result_ = Status::OK();
  cv_.notify_all();
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

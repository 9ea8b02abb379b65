#include "cc/ps/scheduler.h"

#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/ps/address_books.h"
#include "cc/transport/address.h"

namespace bps {
namespace {

constexpr size_t kTurnedAwayRemembered = 5;

}  // namespace

Scheduler::Scheduler(const Config& config, Transport* transport)
    : config_(config),
      transport_(transport),
      membership_(config.num_worker, config.num_server, ElasticLimits{config.min_workers, config.max_workers}),
      declarations_(config, membership_, [this](PeerId to, const Message& m) { Send(to, m); }) {}

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
  for (PeerId server : membership_.servers()) transport_->Send(server, bytes, nullptr, 0, nullptr);
}

std::string Scheduler::NodeName(PeerId peer) {
  const JobMembership::Member* n = membership_.Find(peer);
  if (n == nullptr) return "an unregistered process (" + transport_->PeerName(peer) + ")";
  std::string rank = n->rank >= 0 ? " " + std::to_string(n->rank) : "";
  return std::string(RoleName(n->role)) + rank + " (" + n->address + ")";
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
  const JobMembership::Member* sender = membership_.Find(from);
  if (sender == nullptr) {
    if (m.type == MessageType::kRegister) return HandleRegister(from, m);
  } else if (sender->role == Role::kWorker) {
    switch (m.type) {
      case MessageType::kDeclare: return HandleDeclare(from, *sender, m);
      case MessageType::kFinish: return HandleFinish(from, m.text == kJoinedMark);
      case MessageType::kAbortRequest: {
        Status failed = Aborted(NodeName(from) + " failed: " + Printable(m.text, 4000));
        if (!membership_.elastic()) return Abort(failed);
        // In an elastic job a worker that fails is lost: the others go on.
        if (sender->part == JobMembership::Part::kActive) return BreakGeneration(from, failed);
        // Between generations too (a reset callback, init() or code after shutdown() failed): the job ends
        // with the last of them, failed.
        if (membership_.Fail(from)) last_lost_ = failed;
        AnnounceWaiting();
        return CheckFormation();
      }
      case MessageType::kNextGeneration:
        if (membership_.elastic()) return HandleNextGeneration(from);
        break;
      default: break;
    }
  } else if (sender->role == Role::kServer) {
    switch (m.type) {
      case MessageType::kServerReady: return HandleServerReady(from);
      case MessageType::kKeyPlanReply: return declarations_.OnKeyPlanReply(from, m, NodeName(from));
      case MessageType::kResetReply: return HandleResetReply(from);
      default: break;
    }
  }
  dropped_.Warn(std::string("scheduler dropped ") + MessageTypeName(m.type) + " from " + NodeName(from) +
                ": not a message that process sends");
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
  const bool worker = b.role == static_cast<int32_t>(Role::kWorker);
  const std::string who = std::string(server ? "server" : worker ? "worker" : "a process") + " at " + b.address;
  const bool joining = membership_.started();
  Status admitted = membership_.Admit(from, b, who);
  if (!admitted.ok()) return Reject(from, who, admitted);
  if (!joining) {
    if (membership_.complete()) SendAddressBooks();
    return;
  }
  // Elastic: it waits for the next generation, which the running one's workers learn of (a server takes the
  // place of a lost one).
  BPS_LOG(Info) << who << " waits to join at the next generation";
  Message pending;
  pending.type = MessageType::kJoinPending;
  Send(from, pending);
  if (forming_) return CheckFormation();
  AnnounceWaiting();
}

void Scheduler::SendAddressBooks() {
  membership_.Start();
  if (membership_.recovering()) {
    BPS_LOG(Warning) << "the job goes on with this scheduler: generation " << membership_.generation()
                     << " forms from the " << membership_.workers().size() << " worker(s) and "
                     << membership_.active_servers() << " server(s) that registered again after generation "
                     << membership_.recovered_generation() << " lost its scheduler";
  }
  SendGenerationBooks();
  BPS_LOG(Info) << (address_book_.slice_bytes ? "partitions cross the network in slices of " +
                                                    std::to_string(address_book_.slice_bytes) + " bytes"
                                              : std::string("partitions cross the network whole"));
}

void Scheduler::SendGenerationBooks() {
  address_book_ = JobAddressBook(config_, membership_);
  declarations_.StartGeneration(address_book_.slice_bytes);
  ready_servers_.clear();
  // Servers first: a worker may push as soon as it has its book, so every server must know the job by then.
  for (PeerId server : membership_.servers()) SendAddressBook(server);
}

void Scheduler::SendAddressBook(PeerId to) {
  Message m;
  m.type = MessageType::kAddressBook;
  m.text = AddressBookFor(address_book_, membership_, to).Encode();
  Send(to, m);
}

void Scheduler::HandleServerReady(PeerId from) {
  // A generation that broke before its servers were ready never reaches its workers.
  if (!membership_.started() || !resetting_.empty() || forming_ || !ready_servers_.insert(from).second) return;
  if (static_cast<int>(ready_servers_.size()) < membership_.active_servers()) return;
  for (const auto& worker : membership_.workers()) SendAddressBook(worker.second);
  if (membership_.generation() == 1) {
    BPS_LOG(Info) << "job started: " << membership_.servers().size() << " servers, "
                  << membership_.workers().size() << " workers";
  } else {
    // A change of servers is news (an elastic job lost one, or took one in); a change of workers the workers
    // report themselves.
    std::ostringstream started;
    started << "generation " << membership_.generation() << " started: " << membership_.workers().size()
            << " workers, " << membership_.active_servers() << " servers";
    if (membership_.servers() != serving_servers_) {
      BPS_LOG(Warning) << started.str();
    } else {
      BPS_LOG(Info) << started.str();
    }
  }
  serving_servers_ = membership_.servers();
  // Registered while this generation formed.
  if (!membership_.Waiting().empty() || membership_.WaitingServers() > 0) AnnounceWaiting();
}

void Scheduler::HandleDeclare(PeerId from, const JobMembership::Member& worker, const Message& m) {
  const bool working = membership_.elastic() ? worker.part == JobMembership::Part::kActive
                                             : worker.part != JobMembership::Part::kFinished;
  const bool in_generation = membership_.started() && ready_servers_.size() >= membership_.servers().size() &&
                             resetting_.empty() && !forming_ && working;
  auto spec = declarations_.Check(m.text, worker.rank, in_generation);
  if (!spec.ok()) {
    Message reply;
    reply.type = MessageType::kDeclareReply;
    reply.request_id = m.request_id;
    reply.set_status(spec.status());
    return Send(from, reply);
  }
  membership_.Activate(from);  // an idle worker starts the generation with its first declaration
  Status fatal = declarations_.Declare(from, worker.rank, m.request_id, spec.value());
  if (!fatal.ok()) Abort(fatal);
}

void Scheduler::AnnounceFinished(int rank, bool joined) {
  Message finished;
  finished.type = MessageType::kWorkerFinished;
  finished.sender = rank;
  if (joined) finished.text = kJoinedMark;
  SendToServers(finished);
  declarations_.Review();
}

void Scheduler::HandleFinish(PeerId from, bool joined) {
  if (!resetting_.empty() || !membership_.Finish(from, joined)) return;
  AnnounceFinished(membership_.last_finished(), joined);
  EndGenerationIfAllFinished();
}

void Scheduler::EndGenerationIfAllFinished() {
  if (!membership_.GenerationFinished()) return;
  // The servers forget this generation's keys before anyone may start the next.
  Message reset;
  reset.type = MessageType::kReset;
  resetting_ = std::set<PeerId>(membership_.servers().begin(), membership_.servers().end());
  broken_ = false;
  SendToServers(reset);
}

void Scheduler::HandleResetReply(PeerId from) {
  if (!resetting_.erase(from) || !resetting_.empty()) return;
  ResetDone();
}

void Scheduler::ResetDone() {
  declarations_.StartGeneration(address_book_.slice_bytes);
  if (!broken_) {
    BPS_LOG(Info) << "generation " << membership_.generation() << " ended: every worker finished";
    Message done;
    done.type = MessageType::kGenerationDone;
    done.sender = membership_.last_finished();
    for (PeerId worker : membership_.NextGeneration()) Send(worker, done);
  }
  if (!membership_.elastic()) {
    if (membership_.AllLeft()) EndJob();
    return;
  }
  forming_ = true;
  forming_since_ = NowSeconds();
  CheckFormation();
}

void Scheduler::BreakGeneration(PeerId lost, const Status& why) {
  const int generation = membership_.generation();
  last_lost_ = why;
  std::vector<PeerId> others = membership_.Break(lost);
  if (others.empty()) return Abort(Status(why.code(), "every worker of the job was lost; the last: " + why.message()));
  BPS_LOG(Warning) << "generation " << generation << " broke: " << why.message() << " The other "
                   << others.size() << " worker(s) go on.";
  AnnounceBroken(others, why);
}

void Scheduler::LoseServer(PeerId lost, const Status& why) {
  const JobMembership::Member* server = membership_.Find(lost);
  if (server->part == JobMembership::Part::kWaiting) {  // it had no part in the job yet
    membership_.RemoveServer(lost);
    return AnnounceWaiting();
  }
  if (membership_.active_servers() <= 1) {
    return Abort(Unavailable(why.message() + " It was the job's last server: an elastic job goes on while at "
                                             "least one server is left."));
  }
  const int generation = membership_.generation();
  const bool running = membership_.started() && resetting_.empty() && !forming_;
  const bool books_out = static_cast<int>(ready_servers_.size()) >= membership_.active_servers();
  ready_servers_.erase(lost);
  if (!running) {
    // A generation ends or forms: the next one goes without it.
    membership_.RemoveServer(lost);
    BPS_LOG(Warning) << why.message() << " The next generation goes on with " << membership_.active_servers()
                     << " server(s).";
    if (resetting_.erase(lost) && resetting_.empty()) ResetDone();
    return;
  }
  if (!books_out) {
    // The generation starts: no worker has its book yet. The servers left get theirs again, without it.
    membership_.RemoveServer(lost);
    BPS_LOG(Warning) << why.message() << " Generation " << generation << " starts with "
                     << membership_.active_servers() << " server(s).";
    return SendGenerationBooks();
  }
  std::vector<PeerId> workers = membership_.LoseServer(lost);
  BPS_LOG(Warning) << "generation " << generation << " broke: " << why.message() << " The "
                   << workers.size() << " worker(s) go on with " << membership_.active_servers() << " server(s).";
  last_lost_ = why;
  AnnounceBroken(workers, why);
}

void Scheduler::AnnounceBroken(const std::vector<PeerId>& workers, const Status& why) {
  Message broken;
  broken.type = MessageType::kGenerationBroken;
  broken.set_status(Aborted("the job's workers changed: " + why.message()));
  for (PeerId worker : workers) Send(worker, broken);
  // The servers drop the unfinished rounds; the next generation forms once they did.
  Message reset;
  reset.type = MessageType::kReset;
  reset.text = kDroppedMark;
  resetting_ = std::set<PeerId>(membership_.servers().begin(), membership_.servers().end());
  broken_ = true;
  SendToServers(reset);
}

void Scheduler::HandleNextGeneration(PeerId from) {
  if (membership_.Ready(from) && forming_) CheckFormation();
}

void Scheduler::CheckFormation() {
  if (!forming_) return;
  switch (membership_.NextFormation()) {
    case JobMembership::Formation::kAwaitingWorkers: return;
    case JobMembership::Formation::kBelowMinimum:
      if (below_minimum_since_ < 0) {
        below_minimum_since_ = NowSeconds();
        BPS_LOG(Warning) << "only " << membership_.Candidates() << " worker(s) left, fewer than BYTEPS_MIN_WORKERS="
                         << config_.min_workers << ": waiting up to BYTEPS_ELASTIC_TIMEOUT="
                         << config_.elastic_timeout_s << " s for workers to join";
      }
      return;
    case JobMembership::Formation::kOver:
    case JobMembership::Formation::kLost: return EndElasticJob();
    case JobMembership::Formation::kForms: break;
  }
  forming_ = false;
  below_minimum_since_ = -1;
  membership_.Form();
  SendGenerationBooks();
}

void Scheduler::AnnounceWaiting() {
  const bool workers_have_books = static_cast<int>(ready_servers_.size()) >= membership_.active_servers();
  if (!membership_.elastic() || forming_ || !resetting_.empty() || !workers_have_books) return;
  // Workers end a generation for a waiting server as for a waiting worker (bps_tf.elastic's commit).
  Message waiting;
  waiting.type = MessageType::kWorkersWaiting;
  waiting.sender = static_cast<int32_t>(membership_.Waiting().size() + membership_.WaitingServers());
  for (const auto& worker : membership_.workers()) {
    if (membership_.Find(worker.second)->part != JobMembership::Part::kLeft) Send(worker.second, waiting);
  }
}

void Scheduler::CheckFormationTimeouts(double now) {
  if (!forming_) return;
  const JobMembership::Formation formation = membership_.NextFormation();
  if (formation == JobMembership::Formation::kAwaitingWorkers && now - forming_since_ > config_.timeout_s) {
    std::string idle;
    for (const std::string& address : membership_.Idle()) idle += (idle.empty() ? "" : ", ") + address;
    std::ostringstream limit;
    limit << config_.timeout_s;
    return Abort(DeadlineExceeded("worker(s) at " + idle + " neither started the next generation (init()) nor "
                                  "left within BYTEPS_TIMEOUT=" + limit.str() + " s"));
  }
  if (formation == JobMembership::Formation::kBelowMinimum && below_minimum_since_ >= 0 &&
      now - below_minimum_since_ > config_.elastic_timeout_s) {
    const int left = membership_.Candidates();
    std::ostringstream limit;
    limit << config_.elastic_timeout_s;
    return Abort(Unavailable("the job needs at least BYTEPS_MIN_WORKERS=" + std::to_string(config_.min_workers) +
                             " workers (bpslaunch --min-workers), but " + std::to_string(left) +
                             (left == 1 ? " is" : " are") + " left and no worker joined within "
                             "BYTEPS_ELASTIC_TIMEOUT=" + limit.str() + " s"));
  }
}

void Scheduler::CheckTimeouts() {
  const double now = NowSeconds();
  if (!membership_.started() && membership_.recovering() && now - start_time_ > config_.timeout_s) {
    std::ostringstream limit;
    limit << "BYTEPS_TIMEOUT=" << config_.timeout_s << " s";
    const std::string back = membership_.RecoveryMissing();
    if (!membership_.RecoveryViable()) {
      return Abort(DeadlineExceeded("a scheduler started in a lost one's place found only " + back + " of generation " +
                                    std::to_string(membership_.recovered_generation()) + " within " + limit.str() +
                                    ": fewer than a server and BYTEPS_MIN_WORKERS workers"));
    }
    BPS_LOG(Warning) << "only " << back << " of generation " << membership_.recovered_generation()
                     << " registered again within " << limit.str() << "; the job goes on without the others";
    return SendAddressBooks();
  }
  if (!membership_.started() && now - start_time_ > config_.timeout_s) {
    std::ostringstream limit;
    limit << "BYTEPS_TIMEOUT=" << config_.timeout_s << " s";
    std::string turned_away;
    for (const std::string& why : turned_away_) turned_away += " Turned away: " + why;
    return Abort(DeadlineExceeded(
        "only " + std::to_string(membership_.servers().size()) + " of " + std::to_string(config_.num_server) +
        " servers and " + std::to_string(membership_.registered_workers()) + " worker processes registered within " +
        limit.str() + "; check that every process was started with the same DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT " +
        "and job secret." + turned_away));
  }
  declarations_.ExpireWaiting(now);
  CheckFormationTimeouts(now);
}

void Scheduler::OnPeerLost(PeerId peer, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  const JobMembership::Member* node = membership_.Find(peer);
  if (node == nullptr) return;  // never registered: nothing depends on it
  if (membership_.elastic() && membership_.started() && node->role == Role::kServer) {
    return LoseServer(peer, Unavailable(NodeName(peer) + " exited or lost its connection (" + why.message() + ")."));
  }
  if (membership_.elastic() && node->role == Role::kWorker) {
    if (membership_.started() && node->part == JobMembership::Part::kActive) {
      return BreakGeneration(peer, Unavailable(NodeName(peer) + " exited or lost its connection (" + why.message() +
                                               ")."));
    }
    const JobMembership::Departure left = membership_.Leave(peer);
    if (left == JobMembership::Departure::kFinished) {
      if (!resetting_.empty()) return;
      if (membership_.AllLeft()) return EndElasticJob();
      return EndGenerationIfAllFinished();
    }
    if (left == JobMembership::Departure::kLost) {
      last_lost_ = Unavailable(NodeName(peer) + " exited or lost its connection (" + why.message() + ").");
    }
    AnnounceWaiting();
    return CheckFormation();
  }
  const JobMembership::Departure departure = membership_.Leave(peer);
  if (departure != JobMembership::Departure::kFailure) {
    // Finished, then gone: a process that is done. Whoever waits on it in a generation it did not start
    // learns so at once.
    if (!resetting_.empty()) return;  // the job ends once the generation is closed
    if (departure == JobMembership::Departure::kIdle) AnnounceFinished(node->rank, false);
    if (membership_.AllLeft()) return EndJob();
    return EndGenerationIfAllFinished();
  }
  Status lost = Unavailable(NodeName(peer) + " exited or lost its connection (" + why.message() + ").");
  if (node->role == Role::kWorker) {
    // A worker often exits because a server died; wait a moment so the abort names the server instead.
    if (pending_abort_.ok()) {
      pending_abort_ = lost;
      pending_abort_at_ = NowSeconds() + kRootCauseWaitSeconds;
    }
    return;
  }
  Abort(lost);
}

void Scheduler::EndElasticJob() {
  if (!membership_.LastGenerationFinished()) {
    // As a failed worker ends a job that is not elastic: every process fails naming it (the waiting ones too).
    if (last_lost_.ok()) return Abort(Aborted("every worker of the job left without finishing"));
    return Abort(Status(last_lost_.code(), "every worker of the job failed or was lost; the last: " +
                                               last_lost_.message()));
  }
  for (PeerId waiting : membership_.DismissWaiting()) {
    if (membership_.Find(waiting)->role == Role::kServer) {
      Message bye;  // a server that waited to join has nothing left to do
      bye.type = MessageType::kShutdown;
      Send(waiting, bye);
      continue;
    }
    Reject(waiting, NodeName(waiting), FailedPrecondition("the job ended before this worker could join it: its "
                                                          "last generation finished"));
  }
  EndJob();
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
  for (PeerId member : membership_.All()) Send(member, abort);
  done_ = true;
  result_ = why;
  cv_.notify_all();
}

}  // namespace bps

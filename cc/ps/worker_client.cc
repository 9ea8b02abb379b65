#include "cc/ps/worker_client.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/communication_counters.h"
#include "cc/common/logging.h"
#include "cc/ps/node_setup.h"
#include "cc/ps/timeouts.h"
#include "cc/transport/address.h"

namespace bps {

WorkerClient::WorkerClient(const Config& config, Transport* transport)
    : config_(config), transport_(transport), rank_(config.rank()) {}

Status WorkerClient::Start() {
  transport_->SetHandler(this);
  BPS_RETURN_IF_ERROR(JoinJob(config_, transport_, &scheduler_));
  auto book = AwaitBook(config_.timeout_s);
  if (!book.ok()) return book.status();
  return TakeBook(book.value());
}

Status WorkerClient::NextGeneration() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
  }
  Message m;
  m.type = MessageType::kNextGeneration;
  m.sender = rank_;
  transport_->Send(scheduler_, m.Encode(), nullptr, 0, nullptr);
  // Below BYTEPS_MIN_WORKERS the scheduler waits BYTEPS_ELASTIC_TIMEOUT for workers, then aborts the job.
  auto book = AwaitBook(config_.elastic_timeout_s + config_.timeout_s);
  if (!book.ok()) return book.status();
  return TakeBook(book.value());
}

StatusOr<AddressBook> WorkerClient::AwaitBook(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  const double started = NowSeconds();
  while (books_.empty()) {
    if (!failure_.ok()) return failure_;
    const double limit = join_pending_ ? config_.elastic_timeout_s + config_.timeout_s : seconds;
    const double left = started + limit - NowSeconds();
    if (left <= 0) {
      std::ostringstream text;
      if (join_pending_) {
        text << "this worker was not admitted into the running job within BYTEPS_ELASTIC_TIMEOUT="
             << config_.elastic_timeout_s << " s: its workers did not end a generation (bps_tf.elastic's "
             << "state.commit() does, where workers are waiting)";
      } else {
        text << "the job did not start within " << limit << " s (BYTEPS_TIMEOUT=" << config_.timeout_s
             << "): not every server and worker reached the scheduler";
      }
      return DeadlineExceeded(text.str());
    }
    generation_cv_.wait_for(lock, std::chrono::duration<double>(std::min(left, 1.0)));
  }
  Message reply = books_.front();
  books_.pop_front();
  join_pending_ = false;
  if (!reply.status().ok()) return reply.status();
  return AddressBook::Decode(reply.text);
}

Status WorkerClient::TakeBook(const AddressBook& book) {
  rank_ = book.your_rank;
  num_workers_ = book.num_workers;
  generation_ = book.generation;
  slice_bytes_ = book.slice_bytes;
  token_ = book.your_token;
  if (!servers_.empty()) return Identify();  // a later generation: the same servers, a new place among workers
  server_addresses_ = book.servers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shared_.resize(server_addresses_.size());
  }
  for (const std::string& address : server_addresses_) {
    auto peer = transport_->Connect(address, config_.timeout_s, Link::kData);
    if (!peer.ok()) return Status(peer.status().code(), "cannot reach a server: " + peer.status().message());
    std::lock_guard<std::mutex> lock(mu_);
    servers_.push_back(peer.value());
  }
  auto mine = AdvertisedHost(config_);
  for (const std::string& address : server_addresses_) {
    auto theirs = ParseHostPort(address);
    server_on_this_host_.push_back(mine.ok() && theirs.ok() && theirs.value().host == mine.value());
  }
  return Identify();
}

// Shows every server the token the scheduler gave this worker, so that its connection speaks for its rank.
Status WorkerClient::Identify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    identified_.clear();
    for (size_t i = 0; i < servers_.size(); ++i) identified_.push_back(std::make_unique<OneShot<Status>>());
  }
  for (size_t i = 0; i < servers_.size(); ++i) {
    Message m;
    m.type = MessageType::kIdentify;
    m.sender = rank_;
    m.text = token_;
    transport_->Send(servers_[i], m.Encode(), nullptr, 0, nullptr);
  }
  Deadline deadline(config_.timeout_s);
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto answer = identified_[i]->Wait(deadline.remaining());
    if (!answer) return DeadlineExceeded(ServerName(static_cast<int>(i)) + " did not answer within BYTEPS_TIMEOUT");
    if (!answer->ok()) return Status(answer->code(), ServerName(static_cast<int>(i)) + ": " + answer->message());
  }
  return Status::OK();
}

bool WorkerClient::AllServersOnThisHost() const {
  return std::find(server_on_this_host_.begin(), server_on_this_host_.end(), false) == server_on_this_host_.end();
}

std::string WorkerClient::ServerName(int server) const {
  return "server " + std::to_string(server) + " (" + server_addresses_[server] + ")";
}

Status WorkerClient::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Status WorkerClient::RequestFailure() {
  std::lock_guard<std::mutex> lock(mu_);
  return !failure_.ok() ? failure_ : generation_failure_;
}

bool WorkerClient::TakeJoinedRunning() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool joined = joined_running_;
  joined_running_ = false;
  return joined;
}

Status WorkerClient::generation_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_failure_;
}

bool WorkerClient::rejoinable() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!config_.elastic() || failure_.ok()) return false;
  // A worker that was stopped loses every connection, the scheduler's among them; a lost server ends the
  // job (the scheduler says so). Give the other news a moment to arrive.
  generation_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return aborted_ || lost_scheduler_; });
  return lost_scheduler_ && lost_scheduler_while_stopped_ && !aborted_;
}

void WorkerClient::NoteAlive() {
  const double now = NowSeconds();
  const double last = last_alive_.exchange(now);
  if (now - last > std::max(1.0, config_.timeout_s / 2)) woke_at_ = now;
}

bool WorkerClient::JustStopped(double now) const {
  // A stop long enough to be removed lasted most of BYTEPS_TIMEOUT; whichever runs first after it, the stop
  // watch or the transport reporting the loss, the gap shows.
  const double gap = std::max(1.0, config_.timeout_s / 2);
  const double last = last_alive_, woke = woke_at_;
  return now - last > gap || (woke >= 0 && now - woke < config_.timeout_s);
}

uint64_t WorkerClient::Track(Pending pending) {
  pending.started = NowSeconds();
  Status failed;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_request_++;
    failed = !failure_.ok() ? failure_ : generation_failure_;
    if (failed.ok()) {
      pending_[id] = std::move(pending);
      return id;
    }
  }
  // The job (or the generation) failed between the caller's check and now: every request known then has
  // been answered, and this one would otherwise wait for a reply that cannot come. Nothing is sent.
  Answer(pending, failed);
  return 0;
}

void WorkerClient::Answer(Pending& p, const Status& status) {
  if (p.declare_done) {
    p.declare_done(status);
  } else {
    p.done(status);
  }
}

void WorkerClient::Sent(uint64_t id) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    it->second.sending = false;
    if (it->second.deferred.ok() || it->second.receiving) return;
    p = std::move(it->second);
    pending_.erase(it);
  }
  Answer(p, p.deferred);
}

void WorkerClient::SendOrFail(PeerId to, const Message& m, const void* payload, size_t bytes, uint64_t request_id,
                              std::function<void()> on_sent) {
  transport_->Send(to, m.Encode(), payload, bytes, [this, request_id, on_sent](const Status& sent) {
    if (on_sent) on_sent();
    Sent(request_id);
    if (sent.ok()) return;
    Message failed;
    failed.set_status(sent);
    Complete(-1, request_id, failed, nullptr);
  });
}

void WorkerClient::Declare(const TensorSpec& spec, DeclareDone done) {
  Status failed = RequestFailure();
  if (!failed.ok()) return done(failed);
  Pending p;
  p.declare_done = std::move(done);
  p.peer = scheduler_;
  p.what = "the declaration of tensor '" + spec.name + "' to the scheduler";
  Message m;
  m.type = MessageType::kDeclare;
  m.sender = rank_;
  m.request_id = Track(std::move(p));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  m.text = spec.Encode();
  SendOrFail(scheduler_, m, nullptr, 0, m.request_id);
}

void WorkerClient::PushPull(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input,
                            void* output, std::function<void()> on_sent, Done done) {
  SendPush(part, round, me, dtype, input, output, part.count * DataTypeSize(dtype), /*shareable=*/true,
           std::move(on_sent), std::move(done));
}

void WorkerClient::PushPullEncoded(const Partition& part, uint32_t round, Participant me, const void* encoded,
                                   void* encoded_sum, size_t bytes, std::function<void()> on_sent, Done done) {
  SendPush(part, round, me, DataType::kFloat32, encoded, encoded_sum, bytes, /*shareable=*/false, std::move(on_sent),
           std::move(done));
}

void WorkerClient::SendPush(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input,
                            void* output, size_t wire_bytes, bool shareable, std::function<void()> on_sent, Done done) {
  Status failed = RequestFailure();
  if (!failed.ok()) {
    if (on_sent) on_sent();
    return done(failed);
  }
  const size_t bytes = input == nullptr ? 0 : wire_bytes;
  SharedPush shared = shareable ? PlanSharedPush(part, bytes, input != nullptr) : SharedPush{};
  // A server on this host sums straight from its arena: the data crosses in one memcpy, not the transport.
  if (shared.destination != nullptr) std::memcpy(shared.destination, input, bytes);
  Pending p;
  p.done = std::move(done);
  p.peer = servers_[part.server];
  p.server = part.server;
  p.key = part.key;
  p.source = input;
  p.destination = output;
  p.bytes = wire_bytes;
  p.sum = true;
  p.what = "the sum of round " + std::to_string(round) + " from " + ServerName(part.server) +
           " (it answers once every worker has pushed)";
  Message m;
  m.type = MessageType::kPush;
  m.sender = me.index;
  m.participants = me.count;
  m.key = part.key;
  m.round = round;
  m.dtype = dtype;
  m.num_elements = part.count;
  m.zeros = input == nullptr;
  m.share = shared.share;
  m.in_shared = shared.destination != nullptr;
  const bool payload = !m.zeros && !m.in_shared;
  p.sending = payload && bytes > 0;
  m.request_id = Track(std::move(p));
  if (m.request_id == 0) {  // answered: the job or the generation failed
    if (on_sent) on_sent();
    return;
  }
  CommunicationCounters::OfProcess().Pushed(bytes, input == nullptr ? 0 : part.count * DataTypeSize(dtype));
  SendOrFail(servers_[part.server], m, payload ? input : nullptr, payload ? bytes : 0, m.request_id,
             std::move(on_sent));
}

void WorkerClient::Fetch(const Partition& part, uint32_t round, DataType dtype, void* output, Done done) {
  Status failed = RequestFailure();
  if (!failed.ok()) return done(failed);
  Pending p;
  p.done = std::move(done);
  p.peer = servers_[part.server];
  p.server = part.server;
  p.key = part.key;
  p.destination = output;
  p.bytes = part.count * DataTypeSize(dtype);
  p.sum = true;
  p.what = "round " + std::to_string(round) + " of a published tensor from " + ServerName(part.server) +
           " (it answers once the publisher has pushed it)";
  Message m;
  m.type = MessageType::kFetch;
  m.sender = rank_;
  m.key = part.key;
  m.round = round;
  m.dtype = dtype;
  m.num_elements = part.count;
  m.request_id = Track(std::move(p));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  SendOrFail(servers_[part.server], m, nullptr, 0, m.request_id);
}

void WorkerClient::SaveResidual(const Partition& part, Participant me, float* residual, Done done) {
  SendResidual(MessageType::kSaveResidual, part, me, nullptr, residual, std::move(done));
}

void WorkerClient::LoadResidual(const Partition& part, Participant me, const float* residual, Done done) {
  SendResidual(MessageType::kLoadResidual, part, me, residual, nullptr, std::move(done));
}

void WorkerClient::SendResidual(MessageType type, const Partition& part, Participant me, const float* source,
                                float* destination, Done done) {
  Status failed = RequestFailure();
  if (!failed.ok()) return done(failed);
  const size_t bytes = part.count * sizeof(float);
  Pending p;
  p.done = std::move(done);
  p.peer = servers_[part.server];
  p.server = part.server;
  p.key = part.key;
  p.destination = destination;
  p.bytes = destination == nullptr ? 0 : bytes;
  p.what = std::string("the residual of key ") + std::to_string(part.key) + " from " + ServerName(part.server);
  p.sending = source != nullptr && bytes > 0;
  Message m;
  m.type = type;
  m.sender = me.index;
  m.participants = me.count;
  m.key = part.key;
  m.dtype = DataType::kFloat32;
  m.num_elements = part.count;
  m.request_id = Track(std::move(p));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  SendOrFail(servers_[part.server], m, source, source == nullptr ? 0 : bytes, m.request_id);
}

WorkerClient::SharedPush WorkerClient::PlanSharedPush(const Partition& part, size_t bytes, bool has_data) {
  SharedPush push;
  std::lock_guard<std::mutex> lock(mu_);
  const SharedServer& server = shared_[part.server];
  if (!config_.shared_memory || !server_on_this_host_[part.server] || server.unusable) return push;
  push.share = server.view ? ShareMode::kMapped : ShareMode::kOffer;
  // An offset is good for one push: the server may make that buffer the round's running sum, and only a
  // successful reply says where the next push goes. After a failed round the next push takes the transport.
  auto it = next_receive_.find(part.key);
  if (it == next_receive_.end()) return push;
  if (server.view && has_data) push.destination = server.view->At(it->second, bytes);
  next_receive_.erase(it);
  return push;
}

Status WorkerClient::TakeSharedReply(const Pending& p, const Message& reply) {
  if (reply.shared_receive == Message::kNoOffset) return Status::OK();
  const SharedArenaView* view = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SharedServer& server = shared_[p.server];
    if (!server.view && !server.unusable && !reply.text.empty()) {
      auto opened = SharedArenaView::Open(reply.text);
      if (opened.ok()) {
        server.view = std::move(opened.value());
      } else {
        server.unusable = true;
        BPS_LOG(Info) << ServerName(p.server) << " is on this host, but its shared memory cannot be mapped ("
                      << opened.status().message() << "): tensors go through the transport";
      }
    }
    view = server.view.get();
    if (view != nullptr) next_receive_[p.key] = reply.shared_receive;
  }
  if (reply.shared_result == Message::kNoOffset) return Status::OK();
  const char* sum = view == nullptr ? nullptr : view->At(reply.shared_result, p.bytes);
  if (sum == nullptr) return Internal("the sum from " + ServerName(p.server) + " is not in its shared memory");
  std::memcpy(p.destination, sum, p.bytes);
  return Status::OK();
}

void* WorkerClient::PayloadDestination(PeerId from, const std::string& header, size_t length) {
  auto m = Message::Decode(header);
  if (!m.ok() || m.value().type != MessageType::kPullReply) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(m.value().request_id);
  if (it == pending_.end() || it->second.peer != from || it->second.bytes != length) return nullptr;
  // The transport writes into the caller's memory until the message is whole: the request waits for it.
  if (it->second.destination != nullptr) it->second.receiving = true;
  return it->second.destination;
}

void WorkerClient::OnMessage(PeerId from, const std::string& header, void* payload, size_t length) {
  auto decoded = Message::Decode(header);
  if (!decoded.ok()) {
    dropped_.Warn("worker dropped a malformed message from " + transport_->PeerName(from));
    return;
  }
  Message& m = decoded.value();
  if (from == scheduler_) {
    switch (m.type) {
      case MessageType::kAddressBook: {
        std::lock_guard<std::mutex> lock(mu_);
        // What follows the book on this connection is about its generation.
        generation_failure_ = Status::OK();
        workers_waiting_ = 0;
        next_receive_.clear();
        books_.push_back(m);
        generation_cv_.notify_all();
        return;
      }
      case MessageType::kJoinPending: {
        std::lock_guard<std::mutex> lock(mu_);
        join_pending_ = joined_running_ = true;
        BPS_LOG(Info) << "waiting to join the running job at its next generation";
        return;
      }
      case MessageType::kWorkersWaiting: workers_waiting_ = m.sender; return;
      case MessageType::kGenerationBroken: return BreakGeneration(m.status());
      case MessageType::kGenerationDone: {
        std::lock_guard<std::mutex> lock(mu_);
        // The servers forgot every key: offsets into their shared memory no longer hold.
        next_receive_.clear();
        ++generations_done_;
        last_to_finish_ = m.sender;
        generation_cv_.notify_all();
        return;
      }
      case MessageType::kAbort: {
        {
          std::lock_guard<std::mutex> lock(mu_);
          aborted_ = true;
          books_.push_back(m);
        }
        return Fail(m.status());
      }
      case MessageType::kDeclareReply: return Complete(from, m.request_id, m, payload);
      default: break;
    }
  } else {
    switch (m.type) {
      case MessageType::kPullReply:
        if (m.status().ok() && payload == nullptr && length > 0 && !m.zeros && !m.echo) {
          m.set_status(Internal("the pulled data could not be received"));
        }
        return Complete(from, m.request_id, m, payload);
      case MessageType::kIdentifyReply: {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < servers_.size(); ++i) {
          if (servers_[i] == from) identified_[i]->Set(m.status());
        }
        return;
      }
      default: break;
    }
  }
  dropped_.Warn(std::string("worker dropped ") + MessageTypeName(m.type) + " from " + transport_->PeerName(from));
}

void WorkerClient::Complete(PeerId from, uint64_t request_id, const Message& reply, void*) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(request_id);
    if (it == pending_.end()) return;  // already failed (timeout or job failure)
    if (from >= 0 && it->second.peer != from) return;  // not from the peer the request went to
    p = std::move(it->second);
    pending_.erase(it);
  }
  if (!p.deferred.ok()) return Answer(p, p.deferred);  // it failed while the transport was still using it
  Status status = reply.status();
  if (status.code() == Code::kAborted && status.message() == kRoundDropped) {
    // The server dropped this generation's rounds: it broke (the scheduler's word may come later).
    BreakGeneration(Aborted("the job's workers changed: a worker of this generation was lost (" +
                            std::string(kRoundDropped) + ")"));
    status = RequestFailure();
  }
  if (p.declare_done) {
    if (!status.ok()) return p.declare_done(status);
    auto plan = PartitionPlan::Decode(reply.text);
    return p.declare_done(plan);
  }
  if (status.ok()) status = TakeSharedReply(p, reply);
  if (!status.ok()) status = Status(status.code(), status.message() + " (while waiting for " + p.what + ")");
  if (status.ok() && p.sum) {
    // Through the network or, from a server on this host, its shared memory; zeros and echoes carry none.
    CommunicationCounters::OfProcess().Pulled(reply.zeros || reply.echo ? 0 : p.bytes);
    CommunicationCounters::OfProcess().WaitEnded(reply.held_us * 1e-6);
  }
  if (status.ok() && (reply.zeros || reply.echo)) {
    // The sum came without bytes: it is zeros, or what this worker pushed.
    if (reply.zeros || p.source == nullptr) {
      std::memset(p.destination, 0, p.bytes);
    } else if (p.source != p.destination) {
      std::memcpy(p.destination, p.source, p.bytes);
    }
  }
  p.done(status);
}

void WorkerClient::Fail(const Status& why) {
  bool may_rejoin;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return;
    failure_ = why;
    may_rejoin = config_.elastic() && lost_scheduler_ && lost_scheduler_while_stopped_ && !aborted_;
  }
  if (may_rejoin) {
    // Stopped longer than BYTEPS_TIMEOUT: the job went on without this worker (see rejoinable).
    BPS_LOG(Warning) << why.message() << "; this process was stopped, and an elastic job removes a worker "
                     << "it does not hear from: the worker joins it again at its next init()";
  } else {
    BPS_LOG(Error) << "the job failed: " << why.message();
  }
  generation_cv_.notify_all();
  FailPending(why);
}

void WorkerClient::BreakGeneration(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok() || !generation_failure_.ok()) return;
    generation_failure_ = why;
    next_receive_.clear();  // the servers drop the generation's keys
  }
  BPS_LOG(Warning) << why.message();
  generation_cv_.notify_all();
  FailPending(why);
}

void WorkerClient::FailPending(const Status& why, PeerId lost) {
  std::vector<Pending> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& p = it->second;
      if ((p.sending || p.receiving) && p.peer != lost) {
        if (p.deferred.ok()) p.deferred = why;
        ++it;
        continue;
      }
      failed.push_back(std::move(p));
      it = pending_.erase(it);
    }
  }
  for (Pending& p : failed) Answer(p, why);
}

// The scheduler and the servers time out what they wait for after BYTEPS_TIMEOUT and say who is missing;
// this is the fallback for when that answer cannot come, a moment later so that it does not pre-empt it.
void WorkerClient::FailExpiredRequests() {
  const double now = NowSeconds();
  const double limit = MissingWorkerTimeout(config_) + std::max(1.0, config_.timeout_s / 10);
  std::vector<Pending> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (now - it->second.started < limit) {
        ++it;
        continue;
      }
      expired.push_back(std::move(it->second));
      it = pending_.erase(it);
    }
  }
  for (Pending& p : expired) {
    std::ostringstream text;
    text << "timed out after BYTEPS_TIMEOUT=" << config_.timeout_s << " s waiting for " << p.what
         << "; another worker may have stopped calling push_pull, or be far slower (raise BYTEPS_TIMEOUT)";
    Status status = DeadlineExceeded(text.str());
    if (p.declare_done) {
      p.declare_done(status);
    } else {
      p.done(status);
    }
  }
}

void WorkerClient::OnPeerLost(PeerId peer, const Status& why) {
  std::string who = "a peer";
  if (peer == scheduler_) who = "the scheduler";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i] == peer) who = ServerName(static_cast<int>(i));
    }
    if (peer == scheduler_) {
      lost_scheduler_ = true;
      lost_scheduler_while_stopped_ = JustStopped(NowSeconds());
    }
  }
  generation_cv_.notify_all();
  Status lost = Unavailable("lost " + who + ": it exited or its connection broke (" + why.message() + ")");
  Fail(lost);
  FailPending(lost, peer);  // what the lost connection was still carrying, now that it carries nothing
}

StatusOr<int> WorkerClient::EndGeneration(bool joined) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failure_.ok()) return failure_;
  if (!generation_failure_.ok()) return -1;  // it broke: it is over for everyone already
  const int before = generations_done_;
  Message m;
  m.type = MessageType::kFinish;
  m.sender = rank_;
  if (joined) m.text = kJoinedMark;
  transport_->Send(scheduler_, m.Encode(), nullptr, 0, nullptr);
  bool done = generation_cv_.wait_for(lock, std::chrono::duration<double>(config_.timeout_s), [&] {
    return generations_done_ > before || !failure_.ok() || !generation_failure_.ok();
  });
  if (!failure_.ok()) return failure_;
  if (!generation_failure_.ok()) return -1;
  if (!done) return DeadlineExceeded("other workers did not finish within BYTEPS_TIMEOUT; leaving anyway");
  return last_to_finish_;
}

void WorkerClient::RequestAbort(const std::string& why) {
  Message m;
  m.type = MessageType::kAbortRequest;
  m.sender = rank_;
  m.text = why;
  transport_->Send(scheduler_, m.Encode(), nullptr, 0, nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  Fail(Aborted("this worker failed: " + why));
}

}  // namespace bps

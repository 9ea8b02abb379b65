#include "cc/ps/worker_operations.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/communication_counters.h"
#include "cc/ps/timeouts.h"

namespace bps {

void WorkerOperations::Declare(const TensorSpec& spec, DeclareDone done) {
  Status failed = requests_->refusal();
  if (!failed.ok()) return done(failed);
  Request r;
  r.declare_done = std::move(done);
  r.peer = lifecycle_->scheduler();
  r.awaits = Request::Awaits::kDeclaration;
  r.tensor = spec.name;
  Message m;
  m.type = MessageType::kDeclare;
  m.sender = lifecycle_->rank();
  m.request_id = requests_->Track(std::move(r));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  m.text = spec.Encode();
  SendOrFail(lifecycle_->scheduler(), m, nullptr, 0, m.request_id);
}

void WorkerOperations::PushPull(const Partition& part, uint32_t round, Participant me, DataType dtype,
                                const void* input, void* output, std::function<void()> on_sent, Done done,
                                FusedPushes* fused, std::shared_ptr<DataMover> mover, InPlaceMark in_place) {
  if (fused != nullptr && mover == nullptr) {
    fused->pushes.push_back(FusedPushes::Push{part, round, me, dtype, input, output, std::move(on_sent),
                                              std::move(done), std::move(in_place)});
    return;
  }
  SendPush(part, round, me, dtype, input, output, part.count * DataTypeSize(dtype), /*shareable=*/true,
           std::move(on_sent), std::move(done), std::move(mover), std::move(in_place));
}

void WorkerOperations::PushPullEncoded(const Partition& part, uint32_t round, Participant me, const void* encoded,
                                       void* encoded_sum, size_t bytes, std::function<void()> on_sent, Done done) {
  SendPush(part, round, me, DataType::kFloat32, encoded, encoded_sum, bytes, /*shareable=*/false, std::move(on_sent),
           std::move(done));
}

void WorkerOperations::SendPush(const Partition& part, uint32_t round, Participant me, DataType dtype,
                                const void* input, void* output, size_t wire_bytes, bool shareable,
                                std::function<void()> on_sent, Done done, std::shared_ptr<DataMover> mover,
                                InPlaceMark in_place) {
  Status failed = requests_->refusal();
  if (!failed.ok()) {
    if (on_sent) on_sent();
    return done(failed);
  }
  const bool may_go_in_place = in_place != nullptr && mover == nullptr;
  OutgoingPush out{FusedPushes::Push{part, round, me, dtype, input, output, std::move(on_sent), std::move(done),
                                     std::move(in_place)},
                   wire_bytes, {}, std::move(mover)};
  if (shareable) out.shared = shared_->PlanPush(part.server, part.key, out.bytes(), input, output, may_go_in_place);
  // A server on this host sums straight from its arena: the data crosses in one memcpy, not the transport.
  // A mover puts it there from where it is (or stages it for the transport): started on the thread of
  // pushes_to_host_, so that this thread goes on to the next push, and waited for on that of
  // pushes_landing_, so that the next copies start meanwhile.
  if (out.mover != nullptr && out.bytes() > 0) {
    auto moving = std::make_shared<OutgoingPush>(std::move(out));
    pushes_to_host_.Post([this, moving, generation = requests_->generations()] {
      // A generation that broke meanwhile planned this push: its arena place may be another's now.
      Status stands = GenerationStands(generation);
      if (!stands.ok()) return SendPlanned(std::move(*moving), stands);
      void* to = moving->shared.destination != nullptr ? static_cast<void*>(moving->shared.destination)
                                                       : const_cast<void*>(moving->push.input);
      DataMover::InFlight copy = moving->mover->StartToHost(moving->push.input, to, moving->bytes());
      pushes_landing_.Post([this, moving, generation, copy = std::move(copy)] {
        Status moved = AwaitCopy(copy);
        if (moved.ok()) moved = GenerationStands(generation);  // the copies queued before it took a while
        SendPlanned(std::move(*moving), moved);
      });
    });
    return;
  }
  if (out.shared.destination != nullptr) shared_->Copy(out.shared.destination, input, out.bytes());
  SendPlanned(std::move(out), Status::OK());
}

void WorkerOperations::SendPlanned(OutgoingPush out, const Status& moved) {
  FusedPushes::Push& push = out.push;
  const Partition& part = push.part;
  if (!moved.ok()) {
    // Nothing left: the server's round misses this push and times out, as with a worker that stopped.
    if (push.on_sent) push.on_sent();
    return push.done(Status(moved.code(), "moving the push of key " + std::to_string(part.key) +
                                              " to the host: " + moved.message()));
  }
  const PeerId server = servers_->peer(part.server);
  Request r;
  r.done = std::move(push.done);
  r.peer = server;
  r.server = part.server;
  r.key = part.key;
  r.source = push.input;
  r.destination = push.output;
  r.bytes = out.wire_bytes;
  r.sum = true;
  r.mover = std::move(out.mover);
  r.round = push.round;
  r.in_place = out.shared.share == ShareMode::kInPlace;
  if (r.in_place) push.in_place->store(true);  // before it leaves: a failure after that keeps the memory
  r.heap_offered = out.shared.heap != nullptr;
  Message m;
  m.type = MessageType::kPush;
  m.sender = push.me.index;
  m.participants = push.me.count;
  m.key = part.key;
  m.round = push.round;
  m.dtype = push.dtype;
  m.num_elements = part.count;
  m.zeros = push.input == nullptr;
  m.share = out.shared.share;
  m.in_shared = out.shared.destination != nullptr;
  m.in_place_input = out.shared.in_place_input;
  m.in_place_output = out.shared.in_place_output;
  if (out.shared.heap != nullptr) m.text = *out.shared.heap;
  const bool payload = !m.zeros && !m.in_shared && m.share != ShareMode::kInPlace;
  r.sending = payload && out.bytes() > 0;
  m.request_id = requests_->Track(std::move(r));
  if (m.request_id == 0) {  // answered: the job or the generation failed
    if (push.on_sent) push.on_sent();
    return;
  }
  CommunicationCounters::OfProcess().Pushed(out.bytes(),
                                            push.input == nullptr ? 0 : part.count * DataTypeSize(push.dtype));
  if (m.share == ShareMode::kInPlace) CommunicationCounters::OfProcess().PushedInPlace(out.bytes());
  CommunicationCounters::OfProcess().MessageSent(part.server);
  SendOrFail(server, m, payload ? push.input : nullptr, payload ? out.bytes() : 0, m.request_id,
             std::move(push.on_sent));
}

bool WorkerOperations::Fusable(const FusedPushes::Push& push) {
  return push.part.count * DataTypeSize(push.dtype) < fused_message_bytes() && !shared_->MayShare(push.part.server);
}

void WorkerOperations::SendFused(FusedPushes* fused) {
  for (FusedPushes::Push& push : fused->pushes) {
    const int server = push.part.server;
    if (!Fusable(push)) {
      // The small pushes to its server that wait go first: they started before it (priority order).
      Waiting before = TakeAllWaiting(server);
      for (auto& message : before.messages) SendMany(server, before.generation, std::move(message));
      SendPush(push.part, push.round, push.me, push.dtype, push.input, push.output,
               push.part.count * DataTypeSize(push.dtype), /*shareable=*/true, std::move(push.on_sent),
               std::move(push.done), nullptr, std::move(push.in_place));
      continue;
    }
    // While a small message to the server is on its way, the small pushes that become ready wait for it and
    // then leave together, as they would have queued behind it anyway.
    std::vector<FusedPushes::Push> now, failed;
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(small_mu_);
      StartSmallQueues(&failed);
      generation = small_generation_;
      SmallQueue& queue = small_queues_[server];
      if (queue.waiting.empty()) queue.waiting_since = NowSeconds();
      queue.waiting.push_back(std::move(push));
      if (queue.in_flight == 0) {
        ++queue.in_flight;
        now = TakeMessage(&queue);
      }
    }
    FailPushes(&failed);
    if (!now.empty()) SendMany(server, generation, std::move(now));
  }
  fused->pushes.clear();
}

void WorkerOperations::StartSmallQueues(std::vector<FusedPushes::Push>* failed) {
  const uint64_t generation = requests_->generations();
  if (generation == small_generation_) return;
  for (auto& entry : small_queues_) {
    for (FusedPushes::Push& push : entry.second.waiting) failed->push_back(std::move(push));
  }
  small_queues_.clear();
  small_generation_ = generation;
}

void WorkerOperations::FailPushes(std::vector<FusedPushes::Push>* pushes) {
  for (FusedPushes::Push& push : *pushes) {
    if (push.on_sent) push.on_sent();
    push.done(Aborted("the generation this push was made in ended before it left"));
  }
  pushes->clear();
}

WorkerOperations::Waiting WorkerOperations::TakeAllWaiting(int server) {
  Waiting taken;
  std::vector<FusedPushes::Push> failed;
  {
    std::lock_guard<std::mutex> lock(small_mu_);
    StartSmallQueues(&failed);
    taken.generation = small_generation_;
    auto it = small_queues_.find(server);
    while (it != small_queues_.end() && !it->second.waiting.empty()) {
      ++it->second.in_flight;
      taken.messages.push_back(TakeMessage(&it->second));
    }
  }
  FailPushes(&failed);
  return taken;
}

std::vector<FusedPushes::Push> WorkerOperations::TakeMessage(SmallQueue* queue) {
  std::vector<FusedPushes::Push> message;
  size_t bytes = 0;
  size_t taken = 0;
  for (FusedPushes::Push& push : queue->waiting) {
    const size_t more = push.input == nullptr ? 0 : push.part.count * DataTypeSize(push.dtype);
    if (!message.empty() && (bytes + more > fused_message_bytes() || message.size() == FusedBody::kMaxMembers)) break;
    bytes += more;
    message.push_back(std::move(push));
    ++taken;
  }
  queue->waiting.erase(queue->waiting.begin(), queue->waiting.begin() + taken);
  if (!queue->waiting.empty()) queue->waiting_since = NowSeconds();
  return message;
}

std::vector<int> WorkerOperations::LongWaiting(double now, double seconds) {
  std::vector<int> servers;
  std::lock_guard<std::mutex> lock(small_mu_);
  for (const auto& entry : small_queues_) {
    if (!entry.second.waiting.empty() && now - entry.second.waiting_since > seconds) servers.push_back(entry.first);
  }
  return servers;
}

// A small message to `server` has left (or failed): what waited for the last one goes next. A message of an
// earlier generation's queues counts for nothing now.
void WorkerOperations::SmallSent(int server, uint64_t generation) {
  std::vector<FusedPushes::Push> next;
  {
    std::lock_guard<std::mutex> lock(small_mu_);
    if (generation != small_generation_) return;
    SmallQueue& queue = small_queues_[server];
    if (--queue.in_flight > 0 || queue.waiting.empty()) return;
    ++queue.in_flight;
    next = TakeMessage(&queue);
  }
  SendMany(server, generation, std::move(next));
}

void WorkerOperations::SendMany(int server_rank, uint64_t generation, std::vector<FusedPushes::Push> pushes) {
  Status failed = requests_->refusal();
  if (!failed.ok()) {
    for (FusedPushes::Push& push : pushes) {
      if (push.on_sent) push.on_sent();
      push.done(failed);
    }
    return SmallSent(server_rank, generation);
  }
  const PeerId server = servers_->peer(server_rank);
  auto payload = std::make_shared<std::string>();
  auto on_sent = std::make_shared<std::vector<std::function<void()>>>();
  auto ids = std::make_shared<std::vector<uint64_t>>();
  FusedBody body;
  for (FusedPushes::Push& push : pushes) {
    const size_t bytes = push.input == nullptr ? 0 : push.part.count * DataTypeSize(push.dtype);
    Request r;
    r.done = std::move(push.done);
    r.peer = server;
    r.server = server_rank;
    r.key = push.part.key;
    r.source = push.input;
    r.destination = push.output;
    r.bytes = push.part.count * DataTypeSize(push.dtype);
    r.sum = true;
    r.round = push.round;
    r.sending = bytes > 0;  // until the bytes are copied into the message
    Message m;
    m.type = MessageType::kPush;
    m.sender = push.me.index;
    m.participants = push.me.count;
    m.key = push.part.key;
    m.round = push.round;
    m.dtype = push.dtype;
    m.num_elements = push.part.count;
    m.zeros = push.input == nullptr;
    m.request_id = requests_->Track(std::move(r));
    if (push.on_sent) on_sent->push_back(std::move(push.on_sent));
    if (m.request_id == 0) continue;  // answered: the job or the generation failed
    payload->append(static_cast<const char*>(push.input == nullptr ? "" : push.input), bytes);
    requests_->Sent(m.request_id);
    ids->push_back(m.request_id);
    CommunicationCounters::OfProcess().Pushed(bytes, bytes);
    body.members.push_back(FusedBody::Member{m, bytes});
  }
  if (body.members.empty()) {
    for (auto& fn : *on_sent) fn();
    return SmallSent(server_rank, generation);
  }
  Message header;
  header.type = MessageType::kPushMany;
  header.sender = lifecycle_->rank();
  header.text = body.Encode();
  CommunicationCounters::OfProcess().MessageSent(server_rank);
  transport_->Send(server, header.Encode(), payload->empty() ? nullptr : payload->data(), payload->size(),
                   [this, payload, on_sent, ids, server_rank, generation](const Status& sent) {
                     for (auto& fn : *on_sent) fn();
                     if (!sent.ok()) {
                       for (uint64_t id : *ids) {
                         Message failed;
                         failed.set_status(sent);
                         Complete(-1, id, failed);
                       }
                     }
                     SmallSent(server_rank, generation);
                   });
}

void WorkerOperations::Fetch(const Partition& part, uint32_t round, DataType dtype, void* output, Done done) {
  Status failed = requests_->refusal();
  if (!failed.ok()) return done(failed);
  Request r;
  r.done = std::move(done);
  r.peer = servers_->peer(part.server);
  r.server = part.server;
  r.key = part.key;
  r.destination = output;
  r.bytes = part.count * DataTypeSize(dtype);
  r.sum = true;
  r.awaits = Request::Awaits::kPublished;
  r.round = round;
  Message m;
  m.type = MessageType::kFetch;
  m.sender = lifecycle_->rank();
  m.key = part.key;
  m.round = round;
  m.dtype = dtype;
  m.num_elements = part.count;
  const PeerId server = r.peer;
  m.request_id = requests_->Track(std::move(r));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  CommunicationCounters::OfProcess().MessageSent(part.server);
  SendOrFail(server, m, nullptr, 0, m.request_id);
}

void WorkerOperations::SaveResidual(const Partition& part, Participant me, float* residual, Done done) {
  SendResidual(MessageType::kSaveResidual, part, me, nullptr, residual, std::move(done));
}

void WorkerOperations::LoadResidual(const Partition& part, Participant me, const float* residual, Done done) {
  SendResidual(MessageType::kLoadResidual, part, me, residual, nullptr, std::move(done));
}

void WorkerOperations::SendResidual(MessageType type, const Partition& part, Participant me, const float* source,
                                    float* destination, Done done) {
  Status failed = requests_->refusal();
  if (!failed.ok()) return done(failed);
  const size_t bytes = part.count * sizeof(float);
  Request r;
  r.done = std::move(done);
  r.peer = servers_->peer(part.server);
  r.server = part.server;
  r.key = part.key;
  r.destination = destination;
  r.bytes = destination == nullptr ? 0 : bytes;
  r.awaits = Request::Awaits::kResidual;
  r.sending = source != nullptr && bytes > 0;
  Message m;
  m.type = type;
  m.sender = me.index;
  m.participants = me.count;
  m.key = part.key;
  m.dtype = DataType::kFloat32;
  m.num_elements = part.count;
  const PeerId server = r.peer;
  m.request_id = requests_->Track(std::move(r));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  CommunicationCounters::OfProcess().MessageSent(part.server);
  SendOrFail(server, m, source, source == nullptr ? 0 : bytes, m.request_id);
}

void WorkerOperations::SendOrFail(PeerId to, const Message& m, const void* payload, size_t bytes,
                                  uint64_t request_id, std::function<void()> on_sent) {
  // (on_sent moved, not copied: what it captures, a tensor's name, would be copied for every push.)
  transport_->Send(to, m.Encode(), payload, bytes,
                   [this, request_id, on_sent = std::move(on_sent)](const Status& sent) {
                     if (on_sent) on_sent();
                     requests_->Sent(request_id);
                     if (sent.ok()) return;
                     Message failed;
                     failed.set_status(sent);
                     Complete(-1, request_id, failed);
                   });
}

Status WorkerOperations::AwaitCopy(const DataMover::InFlight& copy) {
  Status copied = copy();
  if (copied.code() == Code::kDeadlineExceeded) lifecycle_->RequestAbort(copied.message());
  return copied;
}

std::string WorkerOperations::Awaited(const Request& r) const {
  switch (r.awaits) {
    case Request::Awaits::kDeclaration:
      return "the declaration of tensor '" + r.tensor + "' to the scheduler";
    case Request::Awaits::kPublished:
      return "round " + std::to_string(r.round) + " of a published tensor from " + servers_->Name(r.server) +
             " (it answers once the publisher has pushed it)";
    case Request::Awaits::kResidual:
      return "the residual of key " + std::to_string(r.key) + " from " + servers_->Name(r.server);
    case Request::Awaits::kSum:
      break;
  }
  return "the sum of round " + std::to_string(r.round) + " from " + servers_->Name(r.server) +
         " (it answers once every worker has pushed)";
}

// The scheduler and the servers time out what they wait for after BYTEPS_TIMEOUT and say who is missing;
// this is the fallback for when that answer cannot come, a moment later so that it does not pre-empt it.
void WorkerOperations::FailExpired() {
  // Small pushes still waiting for a message on its way leave without it once the job or the generation
  // failed (then they fail), or once they waited a tenth of BYTEPS_TIMEOUT: even if that message's send is
  // never reported, they become requests, answered or timed out as any.
  const double now = NowSeconds();
  const double long_wait = requests_->refusal().ok() ? std::max(1.0, config_.timeout_s / 10) : -1;
  for (int server : LongWaiting(now, long_wait)) {
    Waiting waiting = TakeAllWaiting(server);
    for (auto& message : waiting.messages) SendMany(server, waiting.generation, std::move(message));
  }
  const double limit = MissingWorkerTimeout(config_) + std::max(1.0, config_.timeout_s / 10);
  requests_->FailExpired(now, limit, [this](const Request& r) {
    std::ostringstream text;
    text << "timed out after BYTEPS_TIMEOUT=" << config_.timeout_s << " s waiting for " << Awaited(r)
         << "; another worker may have stopped calling push_pull, or be far slower (raise BYTEPS_TIMEOUT)";
    return DeadlineExceeded(text.str());
  });
}

void* WorkerOperations::ReplyDestination(PeerId from, const std::string& header, size_t length) {
  auto m = Message::Decode(header);
  if (m.ok() && m.value().type == MessageType::kPullReplyMany) {
    auto body = FusedBody::Decode(m.value().text, MessageType::kPullReply);
    if (!body.ok() || body.value().payload_bytes() != length || length > FusedBody::kMaxPayloadBytes) return nullptr;
    return fused_inboxes_.Allocate(from, length);  // null: each member fails, its sum not received
  }
  if (!m.ok() || m.value().type != MessageType::kPullReply) return nullptr;
  return requests_->ReceiveInto(m.value().request_id, from, length);
}

void WorkerOperations::OnReply(PeerId from, Message& reply, void* payload, size_t length) {
  if (reply.type == MessageType::kPullReply && reply.status().ok() && payload == nullptr && length > 0 &&
      !reply.zeros && !reply.echo) {
    reply.set_status(Internal("the pulled data could not be received"));
  }
  if (reply.type == MessageType::kPullReply) CommunicationCounters::OfProcess().MessageReceived();
  Complete(from, reply.request_id, reply);
}

void WorkerOperations::OnFusedReply(PeerId from, const Message& reply, void* payload) {
  std::vector<char> inbox = fused_inboxes_.Take(from, payload);
  CommunicationCounters::OfProcess().MessageReceived();
  auto body = FusedBody::Decode(reply.text, MessageType::kPullReply);
  if (!body.ok()) {
    // Its requests cannot be told apart: they fail by the timeout (FailExpired).
    BPS_LOG(Error) << "dropped a malformed PULL_REPLY_MANY: " << body.status().message();
    return;
  }
  const bool received = body.value().payload_bytes() == 0 || (payload != nullptr && !inbox.empty());
  const char* at = inbox.data();
  for (FusedBody::Member& member : body.value().members) {
    Message& one = member.header;
    const char* sum = at;
    at += member.payload_bytes;
    if (one.status().ok() && !received && member.payload_bytes > 0) {
      one.set_status(Internal("the pulled data could not be received"));
    }
    Complete(from, one.request_id, one, received ? sum : nullptr, member.payload_bytes);
  }
}

void WorkerOperations::ForgetPeer(PeerId peer) { fused_inboxes_.Forget(peer); }

void WorkerOperations::Complete(PeerId from, uint64_t request_id, const Message& reply, const char* fused_sum,
                                size_t fused_bytes) {
  std::optional<Request> taken = requests_->Take(request_id, from);
  if (!taken) return;  // answered already (timeout or failure), or not from the peer it went to
  Request& r = *taken;
  if (!r.deferred.ok()) return r.Answer(r.deferred);  // it failed while the transport was still using it
  Status status = reply.status();
  if (status.code() == Code::kAborted && status.message() == kRoundDropped) {
    // The server dropped this generation's rounds: it broke (the scheduler's word may come later).
    lifecycle_->BreakGeneration(Aborted("the job's workers changed: a worker of this generation was lost (" +
                                        std::string(kRoundDropped) + ")"));
    status = requests_->refusal();
  }
  if (r.declare_done) {
    if (!status.ok()) return r.declare_done(status);
    return r.declare_done(PartitionPlan::Decode(reply.text));
  }
  if (status.ok() && r.mover != nullptr && fused_sum == nullptr) {
    // The copy of the sum to where it goes (a GPU) starts on the thread of sums_from_host_, not the
    // transport's, and is waited for on that of sums_landing_, so that the next sums' copies start
    // meanwhile. A generation that broke meanwhile leaves the reply untaken: its arena offsets are void.
    auto moving = std::make_shared<Request>(std::move(r));
    auto moving_reply = std::make_shared<Message>(reply);
    return sums_from_host_.Post([this, moving, moving_reply, generation = requests_->generations()] {
      Status placed = GenerationStands(generation);
      DataMover::InFlight copy = StartSum(*moving, *moving_reply, nullptr, 0, &placed);
      sums_landing_.Post([this, moving, moving_reply, placed, copy = std::move(copy)] {
        FinishSum(*moving, *moving_reply, copy ? AwaitCopy(copy) : placed);
      });
    });
  }
  DataMover::InFlight copy = StartSum(r, reply, fused_sum, fused_bytes, &status);
  FinishSum(r, reply, copy ? AwaitCopy(copy) : status);
}

DataMover::InFlight WorkerOperations::StartSum(Request& r, const Message& reply, const char* fused_sum,
                                               size_t fused_bytes, Status* status) {
  if (status->ok() && fused_sum != nullptr && !reply.zeros && !reply.echo) {
    if (fused_bytes != r.bytes) {
      *status = Internal("a fused reply carried " + std::to_string(fused_bytes) + " bytes for a sum of " +
                         std::to_string(r.bytes));
    } else if (r.bytes > 0) {
      std::memcpy(r.destination, fused_sum, r.bytes);
    }
  }
  if (!status->ok()) return nullptr;
  if (r.heap_offered) shared_->TakeHeapAnswer(r.server, reply.heap_mapped);
  if (r.in_place != reply.written) {
    *status = Internal(r.in_place ? "the server did not write the sum where this worker's push in place asked"
                                  : "the server says it wrote a sum in place for a push that was not");
    return nullptr;
  }
  if (r.in_place) return nullptr;  // the sum is in the output already
  const char* in_arena = nullptr;
  *status = shared_->TakeReply(r.server, r.key, reply, r.destination, r.bytes, r.mover ? &in_arena : nullptr);
  if (!status->ok() || r.mover == nullptr) return nullptr;
  if (in_arena != nullptr) return r.mover->StartFromHost(r.destination, in_arena, r.bytes);
  if (reply.echo || r.bytes == 0) return nullptr;  // what it pushed, still where it was
  // The sum came through the transport (or out of a fused reply) into the staging at `destination`.
  if (reply.zeros) std::memset(r.destination, 0, r.bytes);
  return r.mover->StartFromHost(r.destination, r.destination, r.bytes);
}

void WorkerOperations::FinishSum(Request& r, const Message& reply, Status status) {
  // A server that could not map this process's heap for a push in place (it is out of file descriptors, or
  // the connection is a new one it cannot map through): the next pushes to it are copied.
  if (r.in_place && status.code() == Code::kUnavailable) shared_->TakeHeapAnswer(r.server, false);
  if (!status.ok()) status = Status(status.code(), status.message() + " (while waiting for " + Awaited(r) + ")");
  if (status.ok() && r.sum) {
    // Through the network or, from a server on this host, its shared memory; zeros and echoes carry none.
    CommunicationCounters::OfProcess().Pulled(reply.zeros || reply.echo ? 0 : r.bytes);
    CommunicationCounters::OfProcess().WaitEnded(reply.held_us * 1e-6);
    if (reply.late) CommunicationCounters::OfProcess().LatePush();
    if (reply.latest > 0) {
      CommunicationCounters::OfProcess().Behind(r.key, reply.latest > reply.round ? reply.latest - reply.round : 0);
    }
  }
  if (status.ok() && (reply.zeros || reply.echo) && r.mover == nullptr) {
    // The sum came without bytes: it is zeros, or what this worker pushed.
    if (reply.zeros || r.source == nullptr) {
      std::memset(r.destination, 0, r.bytes);
    } else if (r.source != r.destination) {
      std::memcpy(r.destination, r.source, r.bytes);
    }
  }
  r.done(status);
}

Status WorkerOperations::GenerationStands(uint64_t generation) const {
  Status refused = requests_->refusal();
  if (!refused.ok()) return refused;
  if (requests_->generations() != generation) return Aborted("the job's generation changed during a GPU copy");
  return Status::OK();
}

}  // namespace bps

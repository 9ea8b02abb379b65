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
  r.what = "the declaration of tensor '" + spec.name + "' to the scheduler";
  Message m;
  m.type = MessageType::kDeclare;
  m.sender = lifecycle_->rank();
  m.request_id = requests_->Track(std::move(r));
  if (m.request_id == 0) return;  // answered: the job or the generation failed
  m.text = spec.Encode();
  SendOrFail(lifecycle_->scheduler(), m, nullptr, 0, m.request_id);
}

void WorkerOperations::PushPull(const Partition& part, uint32_t round, Participant me, DataType dtype,
                                const void* input, void* output, std::function<void()> on_sent, Done done) {
  SendPush(part, round, me, dtype, input, output, part.count * DataTypeSize(dtype), /*shareable=*/true,
           std::move(on_sent), std::move(done));
}

void WorkerOperations::PushPullEncoded(const Partition& part, uint32_t round, Participant me, const void* encoded,
                                       void* encoded_sum, size_t bytes, std::function<void()> on_sent, Done done) {
  SendPush(part, round, me, DataType::kFloat32, encoded, encoded_sum, bytes, /*shareable=*/false, std::move(on_sent),
           std::move(done));
}

void WorkerOperations::SendPush(const Partition& part, uint32_t round, Participant me, DataType dtype,
                                const void* input, void* output, size_t wire_bytes, bool shareable,
                                std::function<void()> on_sent, Done done) {
  Status failed = requests_->refusal();
  if (!failed.ok()) {
    if (on_sent) on_sent();
    return done(failed);
  }
  const size_t bytes = input == nullptr ? 0 : wire_bytes;
  SharedPushes::Plan shared =
      shareable ? shared_->PlanPush(part.server, part.key, bytes, input != nullptr) : SharedPushes::Plan{};
  // A server on this host sums straight from its arena: the data crosses in one memcpy, not the transport.
  if (shared.destination != nullptr) std::memcpy(shared.destination, input, bytes);
  const PeerId server = servers_->peer(part.server);
  Request r;
  r.done = std::move(done);
  r.peer = server;
  r.server = part.server;
  r.key = part.key;
  r.source = input;
  r.destination = output;
  r.bytes = wire_bytes;
  r.sum = true;
  r.what = "the sum of round " + std::to_string(round) + " from " + servers_->Name(part.server) +
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
  r.sending = payload && bytes > 0;
  m.request_id = requests_->Track(std::move(r));
  if (m.request_id == 0) {  // answered: the job or the generation failed
    if (on_sent) on_sent();
    return;
  }
  CommunicationCounters::OfProcess().Pushed(bytes, input == nullptr ? 0 : part.count * DataTypeSize(dtype));
  CommunicationCounters::OfProcess().MessageSent(part.server);
  SendOrFail(server, m, payload ? input : nullptr, payload ? bytes : 0, m.request_id, std::move(on_sent));
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
  r.what = "round " + std::to_string(round) + " of a published tensor from " + servers_->Name(part.server) +
           " (it answers once the publisher has pushed it)";
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
  r.what = "the residual of key " + std::to_string(part.key) + " from " + servers_->Name(part.server);
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
  transport_->Send(to, m.Encode(), payload, bytes, [this, request_id, on_sent](const Status& sent) {
    if (on_sent) on_sent();
    requests_->Sent(request_id);
    if (sent.ok()) return;
    Message failed;
    failed.set_status(sent);
    Complete(-1, request_id, failed);
  });
}

// The scheduler and the servers time out what they wait for after BYTEPS_TIMEOUT and say who is missing;
// this is the fallback for when that answer cannot come, a moment later so that it does not pre-empt it.
void WorkerOperations::FailExpired() {
  const double limit = MissingWorkerTimeout(config_) + std::max(1.0, config_.timeout_s / 10);
  requests_->FailExpired(NowSeconds(), limit, [this](const Request& r) {
    std::ostringstream text;
    text << "timed out after BYTEPS_TIMEOUT=" << config_.timeout_s << " s waiting for " << r.what
         << "; another worker may have stopped calling push_pull, or be far slower (raise BYTEPS_TIMEOUT)";
    return DeadlineExceeded(text.str());
  });
}

void* WorkerOperations::ReplyDestination(PeerId from, const std::string& header, size_t length) {
  auto m = Message::Decode(header);
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

void WorkerOperations::Complete(PeerId from, uint64_t request_id, const Message& reply) {
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
  if (status.ok()) status = shared_->TakeReply(r.server, r.key, reply, r.destination, r.bytes);
  if (!status.ok()) status = Status(status.code(), status.message() + " (while waiting for " + r.what + ")");
  if (status.ok() && r.sum) {
    // Through the network or, from a server on this host, its shared memory; zeros and echoes carry none.
    CommunicationCounters::OfProcess().Pulled(reply.zeros || reply.echo ? 0 : r.bytes);
    CommunicationCounters::OfProcess().WaitEnded(reply.held_us * 1e-6);
  }
  if (status.ok() && (reply.zeros || reply.echo)) {
    // The sum came without bytes: it is zeros, or what this worker pushed.
    if (reply.zeros || r.source == nullptr) {
      std::memset(r.destination, 0, r.bytes);
    } else if (r.source != r.destination) {
      std::memcpy(r.destination, r.source, r.bytes);
    }
  }
  r.done(status);
}

}  // namespace bps

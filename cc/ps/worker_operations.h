// A worker's data operations: declaring tensors to the scheduler, pushing partitions to their servers and
// taking back the round's sum, reading published tensors, and moving a compressed key's residual. Each is
// one request of the RequestTable; its reply is taken only from the peer the request went to.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/blocking_tasks.h"
#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/ps/data_mover.h"
#include "cc/ps/fused_inboxes.h"
#include "cc/ps/message.h"
#include "cc/ps/partition_planner.h"
#include "cc/ps/request_table.h"
#include "cc/ps/server_links.h"
#include "cc/ps/shared_pushes.h"
#include "cc/ps/worker_lifecycle.h"
#include "cc/transport/transport.h"

namespace bps {

// Which contribution to a key's round a push is: `index` of `count` (worker rank of the worker processes,
// or worker machine id of the machines, for TensorScope::kMachine).
struct Participant {
  int index;
  int count;
};

// Pushes that became ready together, gathered so that those to one server leave as one message
// (WorkerOperations::SendFused).
struct FusedPushes {
  struct Push {
    Partition part;
    uint32_t round;
    Participant me;
    DataType dtype;
    const void* input;
    void* output;
    std::function<void()> on_sent;
    std::function<void(const Status&)> done;
    InPlaceMark in_place;  // see PushPull
  };
  std::vector<Push> pushes;
};

class WorkerOperations {
 public:
  using Done = Request::Done;
  using DeclareDone = Request::DeclareDone;

  WorkerOperations(const Config& config, Transport* transport, WorkerLifecycle* lifecycle, ServerLinks* servers,
                   RequestTable* requests, SharedPushes* shared)
      : config_(config),
        transport_(transport),
        lifecycle_(lifecycle),
        servers_(servers),
        requests_(requests),
        shared_(shared) {}

  // Callbacks run on the transport thread (or inline, on failure).
  void Declare(const TensorSpec& spec, DeclareDone done);
  // Pushes `input` and receives the round's sum into `output` (which may be `input`). A null `input` is a
  // partition of zeros: only the header is sent. `on_sent` runs once `input` has left, `done` once the sum
  // is in `output`. With `fused`, the push waits there for SendFused instead of leaving at once.
  // With a `mover`, `input` and `output` are staging addresses standing for the data (DataMover): the push
  // is moved by it straight into a same-host server's arena, or staged at `input` before it is sent, and
  // the sum moved from the arena, or from `output` where it arrived; such a push is never fused. Its copies
  // are started and waited for on threads of the worker's own, two each way (FinishMoves), and what follows
  // a copy (the send, `done`) runs on the waiting one.
  // `in_place` (may be null): the push may go in place, a same-host server reading `input` and writing
  // `output` where they are (SharedPushes); the mark is set if it does.
  void PushPull(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input, void* output,
                std::function<void()> on_sent, Done done, FusedPushes* fused = nullptr,
                std::shared_ptr<DataMover> mover = nullptr, InPlaceMark in_place = nullptr);
  // Sends the pushes gathered in `fused` in their order; empties `fused`. Small ones that do not go through
  // shared memory travel in PUSH_MANYs of at most fused_message_bytes(): those to one server that are ready
  // together, or become ready while its last one is being sent, leave together once it has left, or at
  // once before a large push to that server.
  void SendFused(FusedPushes* fused);
  // PushPull of an encoded partition (cc/compress/codec.h): `bytes` go out from `encoded` and the encoded sum
  // of as many bytes comes back into `encoded_sum`. Never through shared memory.
  void PushPullEncoded(const Partition& part, uint32_t round, Participant me, const void* encoded, void* encoded_sum,
                       size_t bytes, std::function<void()> on_sent, Done done);
  // The sum of `round` of a published partition (its publisher's value) into `output`, once pushed.
  void Fetch(const Partition& part, uint32_t round, DataType dtype, void* output, Done done);
  // The server's residual of a compressed key with error feedback (count floats), read into `residual` or
  // replaced by it. Between this worker's rounds of the key only.
  void SaveResidual(const Partition& part, Participant me, float* residual, Done done);
  void LoadResidual(const Partition& part, Participant me, const float* residual, Done done);

  // Waits for the moves under way (a mover's copies, and what follows each): call before what their
  // callbacks use (an engine) goes away.
  void FinishMoves() {
    pushes_to_host_.Drain();
    pushes_landing_.Drain();
    sums_from_host_.Drain();
    sums_landing_.Drain();
  }

  // Fails requests that waited longer than BYTEPS_TIMEOUT (and a moment), and, once the job or the
  // generation failed, the small pushes still waiting to be fused.
  void FailExpired();

  // Where the payload of a reply with `header` from `from` goes (the caller's memory), or null.
  void* ReplyDestination(PeerId from, const std::string& header, size_t length);
  // A reply (PULL_REPLY from a server, DECLARE_REPLY from the scheduler) with its payload, if any.
  void OnReply(PeerId from, Message& reply, void* payload, size_t length);
  // A PULL_REPLY_MANY: each member completes its request, its sum copied out of the message's payload.
  void OnFusedReply(PeerId from, const Message& reply, void* payload);
  // Drops what a lost connection left half received.
  void ForgetPeer(PeerId peer);

  // Partitions smaller than a planner's group are fused, up to a group per message: what the planner puts
  // together on a server, ready together, leaves together.
  size_t fused_message_bytes() const {
    return PartitionPlanner::GroupBytes(config_.partition_bytes, config_.min_spread_bytes);
  }

 private:
  struct SmallQueue {
    int in_flight = 0;  // PUSH_MANYs to the server on their way (each SendMany until its SmallSent)
    std::vector<FusedPushes::Push> waiting;
    double waiting_since = 0;  // since when `waiting` has not moved (queued into empty, or a message left)
  };
  // The servers whose small pushes waited longer than `seconds` for the message before them: a send that is
  // never reported must not hold them back for good.
  std::vector<int> LongWaiting(double now, double seconds);
  // A new generation's queues start empty: a server rank may be another server now, and a message of the
  // last generation that is never reported sent must not hold this one's back. Fails what still waited.
  // With small_mu_ held; the pushes to fail are added to `failed`.
  void StartSmallQueues(std::vector<FusedPushes::Push>* failed);
  bool Fusable(const FusedPushes::Push& push);
  // The first pushes waiting in `queue` that fit one message. With small_mu_ held.
  std::vector<FusedPushes::Push> TakeMessage(SmallQueue* queue);
  // Every push waiting for `server`, as messages counted in flight (before a large push to it), and the
  // queues' generation they count in.
  struct Waiting {
    uint64_t generation = 0;
    std::vector<std::vector<FusedPushes::Push>> messages;
  };
  Waiting TakeAllWaiting(int server);
  // Answers pushes that cannot leave any more (their generation ended).
  static void FailPushes(std::vector<FusedPushes::Push>* pushes);
  // A small message to `server` of the queues' generation `generation` left (or failed).
  void SmallSent(int server, uint64_t generation);
  void SendMany(int server, uint64_t generation, std::vector<FusedPushes::Push> pushes);
  void SendPush(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input, void* output,
                size_t wire_bytes, bool shareable, std::function<void()> on_sent, Done done,
                std::shared_ptr<DataMover> mover = nullptr, InPlaceMark in_place = nullptr);
  // A push whose place is planned (and, with a mover, whose bytes are there unless `moved` failed): sent.
  struct OutgoingPush {
    FusedPushes::Push push;
    size_t wire_bytes;
    SharedPushes::Plan shared;
    std::shared_ptr<DataMover> mover;
    size_t bytes() const { return push.input == nullptr ? 0 : wire_bytes; }  // what leaves (0 for zeros)
  };
  void SendPlanned(OutgoingPush out, const Status& moved);
  // OK while the job stands and is in the generation `generation` (RequestTable::generations()), else why not.
  Status GenerationStands(uint64_t generation) const;
  // The rest of Complete once the reply is known to be `r`'s, while `*status` is OK: its sum to where it
  // goes (`fused_sum`: out of a PULL_REPLY_MANY), a mover's copy of it only started (returned; null when
  // there is none). A failure lands in `*status`.
  DataMover::InFlight StartSum(Request& r, const Message& reply, const char* fused_sum, size_t fused_bytes,
                               Status* status);
  // Then, once the sum is there (or `status` says why not): counters, and `r.done`.
  void FinishSum(Request& r, const Message& reply, Status status);
  void SendResidual(MessageType type, const Partition& part, Participant me, const float* source, float* destination,
                    Done done);
  // Sends request `request_id`; a failed send completes it.
  void SendOrFail(PeerId to, const Message& m, const void* payload, size_t bytes, uint64_t request_id,
                  std::function<void()> on_sent = nullptr);
  // Waits for a mover's copy started before; one that timed out may still write into memory the next
  // rounds use: the job is aborted.
  Status AwaitCopy(const DataMover::InFlight& copy);
  // What request `r` waits for, in words, for an error message.
  std::string Awaited(const Request& r) const;
  // `fused_sum`: a member of a PULL_REPLY_MANY, whose sum (`fused_bytes`) is still to be copied out.
  void Complete(PeerId from, uint64_t request_id, const Message& reply, const char* fused_sum = nullptr,
                size_t fused_bytes = 0);

  const Config& config_;
  Transport* const transport_;
  WorkerLifecycle* const lifecycle_;
  ServerLinks* const servers_;
  RequestTable* const requests_;
  SharedPushes* const shared_;
  std::mutex small_mu_;
  std::map<int, SmallQueue> small_queues_;  // by server rank
  uint64_t small_generation_ = 0;           // RequestTable::generations() when the queues were made
  FusedInboxes fused_inboxes_;  // PULL_REPLY_MANY payloads being received
  // A mover's copies, off the threads that dispatch pushes and receive replies (a reply's copy on a
  // transport thread held up the pushes that thread was to send): pushes to the host and sums back each
  // on threads of their own, so that sums never queue behind a tensor's pushes and the GPU copies both ways
  // at once. One thread each way starts the copies in order and another waits for them: a copy waited for
  // before the next started cost each small tensor a GPU's latency in turn (0.2-0.3 ms with two processes
  // on one GPU: 74 bias and norm gradients at the end of an encoder's step took 20 ms). Copying on two or
  // four threads each way was slower (420 MiB at 10.4 GB/s per worker with two against 11.4 with one).
  // (Last: their threads, which use the members above, stop first; the starting threads, which post to the
  // waiting ones, before those.)
  BlockingTasks pushes_landing_;
  BlockingTasks sums_landing_;
  BlockingTasks pushes_to_host_;
  BlockingTasks sums_from_host_;
};

}  // namespace bps

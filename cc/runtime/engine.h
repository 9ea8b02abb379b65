// The worker engine: turns push_pull requests into partitions, schedules them by priority under the
// credit window (bytes being pushed), and moves each partition through its stages (push, then pull) on
// its own, so the push of one partition overlaps the pull of another.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/work_thread.h"
#include "cc/ps/data_mover.h"
#include "cc/ps/message.h"
#include "cc/ps/worker_client.h"
#include "cc/runtime/callback_gate.h"
#include "cc/runtime/compression_state.h"
#include "cc/runtime/credit_queue.h"
#include "cc/runtime/partition_compressor.h"
#include "cc/transport/transport.h"

namespace bps {

struct PushPullRequest {
  std::string name;  // identifies the tensor across workers and rounds
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  const void* input = nullptr;  // may equal output (in place)
  void* output = nullptr;
  int priority = 0;             // higher first
  // Elements of `input` outside [nonzero_begin, nonzero_end) are zero: partitions that lie wholly outside
  // are pushed as "zeros" without their bytes (a gathered tensor is mostly other workers' rows).
  uint64_t nonzero_begin = 0;
  uint64_t nonzero_end = UINT64_MAX;
  // kMachine: exactly one process of each worker machine pushes this name (its part of the machine's
  // locally reduced sum); the servers then sum one contribution per machine. kPublished: worker `root`
  // pushes, the others fetch its value (see TensorScope).
  TensorScope scope = TensorScope::kProcess;
  ReduceOp op = ReduceOp::kSum;
  std::vector<int32_t> members;  // the process set (ascending ranks); empty: every worker
  int32_t root = 0;
  // Encodes pushes and pulled sums (float32 sums only); every worker gives the same for a name.
  CompressionSpec compression;
  // A gradient: its rounds may complete without the job's backup workers (BYTEPS_BACKUP_WORKERS; the sum
  // is then scaled to stand for every worker). Every worker gives the same for a name.
  bool backups = false;
  // What the request does: moves data (push_pull), or, in order with the name's push_pulls and so between
  // their rounds, saves the name's compression state into `state` or loads it from there (checkpoints).
  enum class Kind : uint8_t { kPushPull, kSaveState, kLoadState };
  Kind kind = Kind::kPushPull;
  std::shared_ptr<CompressionState> state;
  // Set when the data is elsewhere (a GPU tensor): `input` and `output` are then the same host staging
  // buffer, whose addresses stand for the data, and the mover moves the bytes (DataMover). Only for plain
  // sums of every worker's whole tensor: no compression, no published scope, no process set, no range.
  std::shared_ptr<DataMover> mover;
  // Given by a caller that can keep `input` and `output` (unused) after a failure: a server on this host may
  // then read and write them where they are, and the mark tells whether one did (InPlaceMark).
  InPlaceMark in_place;
  std::function<void(const Status&)> done;
  double enqueued_at = 0;  // set by Enqueue (for the timeline)

  // A request of another kind for the tensor of `spec`.
  static PushPullRequest ForState(Kind kind, const TensorSpec& spec, std::shared_ptr<CompressionState> state,
                                  std::function<void(const Status&)> done);
};

// One generation of a worker's work: from init() to shutdown(). The client (the worker's place in the job,
// its connections) may outlive it, so that a process can shut down and init again.
class Engine {
 public:
  // So many distinct names usually means a fresh name per step, which keeps memory growing: warned about.
  static constexpr size_t kManyNames = 10000;

  // Joins the job described by `config` over `transport` (owned: Shutdown closes it). Blocks up to
  // BYTEPS_TIMEOUT.
  static StatusOr<std::unique_ptr<Engine>> Start(const Config& config, std::unique_ptr<Transport> transport);
  // A new generation over a client that already joined the job (WorkerClient::Start).
  static std::unique_ptr<Engine> Start(const Config& config, std::shared_ptr<WorkerClient> client);
  ~Engine();

  // Asynchronous; `done` runs exactly once, on an internal thread. Requests for the same name run in
  // the order they were enqueued.
  void Enqueue(PushPullRequest request);

  // Elastic jobs: while on, every request completes at once with this worker's own value (a push_pull's
  // output is its input), as in a job of one. bps_tf.elastic turns it on from a worker's (re)initialisation
  // until its state is synchronised, so that what a worker runs before the sync (Horovod's examples run a
  // training step to create the optimizer's variables) never waits for workers that are elsewhere.
  void set_local_collectives(bool on) { local_collectives_ = on; }
  bool local_collectives() const { return local_collectives_; }

  // Waits for in-flight requests and for every worker to finish the generation; closes the connections if
  // the engine owns them.
  Status Shutdown();
  // Shutdown() as join(): until every worker finished, the others' rounds complete without this worker
  // (zeros in sums). Returns the rank of the worker that finished last.
  StatusOr<int> Join();

  // This generation's rank (an elastic job renumbers its workers from generation to generation).
  int rank() const { return client_->rank(); }
  int size() const { return client_->num_workers(); }
  int local_rank() const { return config_.local_rank; }
  int local_size() const { return config_.local_size; }
  const Config& config() const { return config_; }
  // The tensors pushed compressed so far (declared), whose state a checkpoint saves.
  std::vector<TensorSpec> CompressedTensors();
  // Partitions cross the network in slices of this size (0: whole); chosen by the scheduler.
  size_t slice_bytes() const { return client_->slice_bytes(); }

 private:
  // The spec of the tensor `request` names, and whether `spec` is it.
  TensorSpec SpecOf(const PushPullRequest& request) const;
  bool Describes(const TensorSpec& spec, const PushPullRequest& request) const;
  struct Operation;
  struct Tensor {
    TensorSpec spec;
    bool declaring = false;
    double declaring_since = 0;
    bool declared = false;
    Status error;  // a failed declaration: every request for this name fails with it
    PartitionPlan plan;
    uint32_t round = 0;
    bool busy = false;
    std::deque<PushPullRequest> queue;
    // With compression, by partition key; made with the plan, then used by the partition's flow only.
    std::map<uint64_t, std::unique_ptr<PartitionCompressor>> compressors;
  };
  struct Operation {
    Tensor* tensor;
    PushPullRequest request;
    size_t remaining;  // parts (partitions, or a state move's pieces) not finished yet
    Status status;
    // Parts handed to the client and not answered yet: the transport may still use their memory.
    std::atomic<int> in_client{0};
    Operation* previous = nullptr;  // the engine's operations in flight (a list through them: no allocation)
    Operation* next = nullptr;
  };
  using Callbacks = std::vector<std::function<void()>>;

  Engine(const Config& config, std::shared_ptr<WorkerClient> client);
  void StartWatchdog();
  StatusOr<int> Finish(bool joined);
  void Advance(Tensor* tensor, Callbacks* later);
  void OnDeclared(Tensor* tensor, const StatusOr<PartitionPlan>& plan);
  void StartPartition(Operation* op, const Partition& part, double queued_at);
  // The push and pull of a compressed partition (StartPartition's second half).
  void PushPullCompressed(Operation* op, const Partition& part, Participant me, const char* input, char* output,
                          size_t bytes, double started);
  // A kSaveState or kLoadState request: this worker's part, and the server's residuals where it keeps them.
  void MoveCompressionState(Operation* op);
  // Why `request`'s mover cannot serve it, or OK.
  static Status CheckMover(const PushPullRequest& request);
  // How many contribute to each round of the tensor (Participant::count).
  int ContributorCount(const TensorSpec& spec) const;
  void ReleaseCredit(size_t bytes);
  void FinishPartition(Operation* op, const Status& status);
  void Track(Operation* op);
  void Untrack(Operation* op);
  // After the gate closed: fails the requests that a shutdown left unfinished, those whose memory no
  // transport holds any more; returns how many it had to leave.
  size_t FailUnfinished(const Status& why);
  // Fails the requests queued for `tensor`, which will not start (with mu_ held; callbacks go to `later`).
  static void FailQueued(Tensor* tensor, const Status& why, Callbacks* later);
  // What a request that a shutdown gave up on fails with.
  static Status Abandoned();
  void Dispatch();
  static void Run(Callbacks& callbacks);

  const Config config_;
  std::unique_ptr<Transport> owned_transport_;  // null when the client belongs to someone else
  std::shared_ptr<WorkerClient> client_;
  std::unique_ptr<WorkThread> watchdog_;
  // Every callback handed to client_ goes through it (callback_gate.h); Finish closes it.
  const std::shared_ptr<CallbackGate> gate_ = std::make_shared<CallbackGate>();

  std::mutex mu_;
  std::condition_variable idle_;
  std::map<std::string, Tensor> tensors_;
  CreditQueue ready_;
  size_t active_operations_ = 0;
  Operation* operations_ = nullptr;  // those in flight, linked
  // Set by a shutdown once it waited for what was in flight: what has not started fails with Abandoned().
  std::atomic<bool> abandoned_{false};
  bool shut_down_ = false;
  std::atomic<bool> local_collectives_{false};
};

}  // namespace bps

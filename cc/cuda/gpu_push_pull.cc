#include "cc/cuda/gpu_push_pull.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "cc/common/clock.h"
#include "cc/common/communication_counters.h"
#include "cc/common/timeline.h"
#include "cc/cuda/cuda_status.h"

namespace bps {
namespace cuda {

// A piece of a member's data that belongs to a chunk.
struct Piece {
  int member;
  uint64_t offset;  // elements from the tensor's start
  uint64_t count;
};

struct GpuPushPull::Chunk {
  std::string name;  // the tensor name the servers see
  uint64_t offset;
  uint64_t count;
  std::vector<Piece> pieces;
  std::atomic<int> copies_pending{0};
};

struct GpuPushPull::Operation {
  std::string name;
  DataType dtype;
  uint64_t count;
  int priority;
  std::vector<GpuTensor> members;
  std::vector<cudaEvent_t> ready;  // per member: where the framework's stream was when it handed us the tensor
  std::function<void(const Status&)> done;
  char* pinned = nullptr;
  uint64_t scatter_count = 0;  // elements covered by the reduce-scatter (a multiple of the member count)
  std::vector<std::unique_ptr<Chunk>> chunks;
  std::atomic<size_t> chunks_pending{0};
  std::shared_ptr<DataMover> mover;     // direct_copies: the GPU copies of the chunks' pushes and sums
  std::atomic<int> reduced_pending{0};  // direct_copies: GPUs whose part of the local reduction is not done
  std::mutex mu;
  Status status;
  bool completed = false;
  double started_at = 0;  // (for the timeline and the communication counters)
  double summed_at = 0;   // the last chunk's sum reached the host

  size_t element() const { return DataTypeSize(dtype); }
  char* device_data(int member, uint64_t offset) const {
    return static_cast<char*>(members[member].data) + offset * element();
  }
};

namespace {

void CUDART_CB RunHostCallback(void* data) {
  auto* fn = static_cast<std::function<void()>*>(data);
  (*fn)();
  delete fn;
}

// Runs fn on CUDA's callback thread once `stream` reaches this point (fn must not call CUDA).
Status WhenReached(cudaStream_t stream, std::function<void()> fn) {
  auto* heap = new std::function<void()>(std::move(fn));
  cudaError_t error = cudaLaunchHostFunc(stream, RunHostCallback, heap);
  if (error != cudaSuccess) delete heap;
  return CudaStatus(error, "cudaLaunchHostFunc");
}

// The position `stream` (of `device`) has reached now, for others to wait on later (WaitOn).
StatusOr<cudaEvent_t> RecordNow(int device, cudaStream_t stream) {
  // The event belongs to the stream's device; a stream of any device may wait on it.
  BPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaEvent_t event;
  BPS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  Status s = CudaStatus(cudaEventRecord(event, stream), "cudaEventRecord");
  if (!s.ok()) {
    cudaEventDestroy(event);
    return s;
  }
  return event;
}

// `waiter` waits (on the GPU) for `event`, which is released here (the wait keeps what it needs).
Status WaitOn(cudaStream_t waiter, cudaEvent_t event) {
  Status s = CudaStatus(cudaStreamWaitEvent(waiter, event, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(event);
  return s;
}

// `waiter` waits (on the GPU) for all work queued on `producer` (a stream of `producer_device`) so far.
Status StreamWaits(cudaStream_t waiter, int producer_device, cudaStream_t producer) {
  auto event = RecordNow(producer_device, producer);
  return event.ok() ? WaitOn(waiter, event.value()) : event.status();
}

}  // namespace

GpuPushPull::GpuPushPull(Engine* engine, LocalNccl* nccl, LocalCoordinator* coordinator, GpuPushPullOptions options)
    : engine_(engine),
      nccl_(nccl),
      coordinator_(coordinator),
      options_(options),
      copy_streams_(std::make_shared<CopyStreams>()) {}

GpuPushPull::~GpuPushPull() {
  // Work still queued on our streams (copies, host callbacks into this object) finishes first, then what
  // those callbacks handed to the enqueuer.
  for (size_t i = 0; i < main_streams_.size(); ++i) {
    cudaSetDevice(nccl_->devices()[i]);
    for (cudaStream_t stream : {main_streams_[i], h2d_streams_[i], notify_streams_[i]}) cudaStreamSynchronize(stream);
  }
  enqueuer_.Stop();
  for (size_t i = 0; i < main_streams_.size(); ++i) {
    cudaSetDevice(nccl_->devices()[i]);
    cudaStreamDestroy(main_streams_[i]);
    cudaStreamDestroy(h2d_streams_[i]);
    cudaStreamDestroy(notify_streams_[i]);
  }
}

Status GpuPushPull::Init() {
  if (options_.distributed && engine_ == nullptr) return InvalidArgument("a distributed GpuPushPull needs an engine");
  if (nccl_->spans_processes() && coordinator_ == nullptr) {
    return InvalidArgument("a GpuPushPull over several processes needs their LocalCoordinator");
  }
  for (int device : nccl_->devices()) {
    BPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaStream_t main, h2d, notify;
    BPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
    BPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&h2d, cudaStreamNonBlocking));
    BPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&notify, cudaStreamNonBlocking));
    main_streams_.push_back(main);
    h2d_streams_.push_back(h2d);
    notify_streams_.push_back(notify);
  }
  return Status::OK();
}

void GpuPushPull::Run(const std::string& name, DataType dtype, uint64_t count, int priority,
                      std::vector<GpuTensor> members, std::function<void(const Status&)> done) {
  auto op = std::make_shared<Operation>();
  op->name = name;
  op->dtype = dtype;
  op->count = count;
  op->priority = priority;
  op->members = std::move(members);
  op->done = std::move(done);
  op->started_at = NowSeconds();
  Status started = Start(op);
  if (!started.ok()) Complete(op, started);
}

Status GpuPushPull::Start(const std::shared_ptr<Operation>& op) {
  const int local = static_cast<int>(nccl_->devices().size());
  if (static_cast<int>(op->members.size()) != local) {
    return InvalidArgument("push_pull of '" + op->name + "' got " + std::to_string(op->members.size()) +
                           " GPU tensors for " + std::to_string(local) + " local GPUs");
  }
  for (const GpuTensor& member : op->members) {
    // Recorded now, waited on when our work is issued: the framework's stream may move on meanwhile.
    auto event = RecordNow(member.device, member.stream);
    if (!event.ok()) return event.status();
    op->ready.push_back(event.value());
  }
  InOrder(op, "reduce", [this, op] { return ReduceLocally(op); });
  return Status::OK();
}

// Runs `issue` (which queues NCCL calls) now, or, with one process per GPU, when the machine's processes
// agree it is this step's turn, so that every process queues its NCCL calls in the same order.
void GpuPushPull::InOrder(const std::shared_ptr<Operation>& op, const std::string& step,
                          std::function<Status()> issue) {
  if (!nccl_->spans_processes()) {
    Status issued = issue();
    if (!issued.ok()) Complete(op, issued);
    return;
  }
  coordinator_->Order(op->name + "/" + step, "", [this, op, issue](const StatusOr<std::string>& turn) {
    Status issued = turn.ok() ? issue() : turn.status();
    if (!issued.ok()) Complete(op, issued);
  });
}

Status GpuPushPull::ReduceLocally(const std::shared_ptr<Operation>& op) {
  const int local = static_cast<int>(op->members.size());
  std::vector<DeviceSpan> spans;
  for (int i = 0; i < local; ++i) {
    BPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(op->members[i].device));
    Status waited = WaitOn(main_streams_[i], op->ready[i]);
    op->ready[i] = nullptr;  // released by WaitOn
    BPS_RETURN_IF_ERROR(waited);
    spans.push_back({op->members[i].device, op->members[i].data, main_streams_[i]});
  }
  op->ready.clear();
  const int n = nccl_->size();
  if (op->count == 0 || !options_.distributed) {
    // Nothing to move, or one worker machine: the local all-reduce is the whole job.
    if (op->count > 0 && n > 1) BPS_RETURN_IF_ERROR(nccl_->AllReduce(spans, op->dtype, op->count));
    Complete(op, FinishOnDevices(op));
    return Status::OK();
  }
  if (options_.mode == LocalReduceMode::kReduceScatter && n > 1) {
    // (One process driving every GPU names chunks on a grid over the whole tensor: nothing to save there.)
    const bool whole = nccl_->spans_processes() &&
                       op->count * op->element() < static_cast<uint64_t>(n) * kWholeBelowBytesPerGpu;
    op->scatter_count = whole ? 0 : op->count - op->count % n;
    if (op->scatter_count > 0) BPS_RETURN_IF_ERROR(nccl_->ReduceScatter(spans, op->dtype, op->scatter_count));
    if (op->scatter_count < op->count) {
      std::vector<DeviceSpan> tail = spans;
      for (auto& span : tail) span.data = static_cast<char*>(span.data) + op->scatter_count * op->element();
      BPS_RETURN_IF_ERROR(nccl_->Reduce(tail, op->dtype, op->count - op->scatter_count, 0));
    }
  } else if (n > 1) {
    BPS_RETURN_IF_ERROR(nccl_->Reduce(spans, op->dtype, op->count, 0));
  }
  return StageToHost(op);
}

// Which parts of the sum this process sends, and under which names. One process driving every GPU: a grid
// over the whole tensor, the same on every worker whatever its number of GPUs (a chunk may gather pieces
// from several GPUs). One process per GPU: each process's own part (its reduce-scatter slice; the tail or
// the whole reduced tensor on NCCL rank 0), cut into chunks named after the part, so that exactly one
// process per machine pushes each name (a per-machine tensor).
void GpuPushPull::PlanChunks(const std::shared_ptr<Operation>& op) {
  const uint64_t per_chunk = std::max<uint64_t>(1, options_.chunk_bytes / op->element());
  const int n = nccl_->size();
  const uint64_t slice = op->scatter_count / n;
  auto owner_end = [&](uint64_t offset, int* owner) {  // the NCCL rank holding the sum at `offset`, and where its part ends
    if (offset < op->scatter_count) {
      *owner = static_cast<int>(offset / slice);
      return (*owner + 1) * slice;
    }
    *owner = 0;
    return op->count;
  };
  auto add_chunk = [&](std::string name, uint64_t offset, uint64_t count) {
    auto chunk = std::make_unique<Chunk>();
    chunk->name = std::move(name);
    chunk->offset = offset;
    chunk->count = count;
    for (uint64_t at = offset; at < offset + count;) {
      int owner;
      uint64_t end = std::min(owner_end(at, &owner), offset + count);
      chunk->pieces.push_back({owner - nccl_->first_rank(), at, end - at});
      at = end;
    }
    chunk->copies_pending = static_cast<int>(chunk->pieces.size());
    op->chunks.push_back(std::move(chunk));
  };
  if (!nccl_->spans_processes()) {
    for (uint64_t offset = 0, index = 0; offset < op->count; offset += per_chunk, ++index) {
      add_chunk(op->name + "#" + std::to_string(index), offset, std::min(per_chunk, op->count - offset));
    }
    return;
  }
  auto add_part = [&](const std::string& part, uint64_t begin, uint64_t end) {
    for (uint64_t offset = begin, index = 0; offset < end; offset += per_chunk, ++index) {
      add_chunk(op->name + "#" + part + "." + std::to_string(index), offset, std::min(per_chunk, end - offset));
    }
  };
  const int rank = nccl_->first_rank();
  if (op->scatter_count > 0) add_part("slice" + std::to_string(rank), rank * slice, (rank + 1) * slice);
  if (rank == 0 && op->scatter_count < op->count) add_part("rest", op->scatter_count, op->count);
}

Status GpuPushPull::StageToHost(const std::shared_ptr<Operation>& op) {
  auto pinned = staging_.Get(op->name, op->count * op->element());
  if (!pinned.ok()) return pinned.status();
  op->pinned = static_cast<char*>(pinned.value());
  PlanChunks(op);
  op->chunks_pending = op->chunks.size();
  if (op->chunks.empty()) {  // this process holds no part of the sum (another GPU of the machine sends it)
    Finish(op);
    return Status::OK();
  }
  if (options_.direct_copies && op->count * op->element() >= options_.direct_copies_from_bytes) {
    return EnqueueWhenReduced(op);
  }
  for (auto& chunk : op->chunks) {
    for (const Piece& piece : chunk->pieces) {
      const GpuTensor& member = op->members[piece.member];
      BPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(member.device));
      BPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(op->pinned + piece.offset * op->element(),
                                               op->device_data(piece.member, piece.offset),
                                               piece.count * op->element(), cudaMemcpyDeviceToHost,
                                               main_streams_[piece.member]));
      Chunk* raw = chunk.get();
      BPS_RETURN_IF_ERROR(StreamWaits(notify_streams_[piece.member], member.device, main_streams_[piece.member]));
      BPS_RETURN_IF_ERROR(WhenReached(notify_streams_[piece.member], [this, op, raw] {
        if (--raw->copies_pending == 0) OnChunkOnHost(op, raw);
      }));
    }
  }
  return Status::OK();
}

Status GpuPushPull::EnqueueWhenReduced(const std::shared_ptr<Operation>& op) {
  std::vector<DeviceRun> runs;
  std::vector<bool> holds(op->members.size(), false);
  for (auto& chunk : op->chunks) {
    for (const Piece& piece : chunk->pieces) {
      runs.push_back({op->members[piece.member].device, op->device_data(piece.member, piece.offset), piece.offset,
                      piece.count});
      holds[piece.member] = true;
    }
  }
  op->mover = std::make_shared<GpuDataMover>(copy_streams_, op->pinned, op->element(), std::move(runs),
                                             engine_->config().timeout_s);
  op->reduced_pending = static_cast<int>(std::count(holds.begin(), holds.end(), true));
  for (size_t i = 0; i < holds.size(); ++i) {
    if (!holds[i]) continue;
    const GpuTensor& member = op->members[i];
    BPS_RETURN_IF_ERROR(StreamWaits(notify_streams_[i], member.device, main_streams_[i]));
    BPS_RETURN_IF_ERROR(WhenReached(notify_streams_[i], [this, op] {
      if (--op->reduced_pending > 0) return;
      enqueuer_.Post([this, op] {
        for (auto& chunk : op->chunks) OnChunkOnHost(op, chunk.get());
      });
    }));
  }
  return Status::OK();
}

void GpuPushPull::OnChunkOnHost(const std::shared_ptr<Operation>& op, Chunk* chunk) {
  // From the request: the framework's stream, the local NCCL reduction and (staged) this chunk's copy to
  // the host.
  Timeline::OfProcess().Span(chunk->name, op->mover ? "REDUCE" : "REDUCE_COPY_D2H", op->started_at, NowSeconds());
  PushPullRequest request;
  request.name = chunk->name;
  request.scope = nccl_->spans_processes() ? TensorScope::kMachine : TensorScope::kProcess;
  request.dtype = op->dtype;
  request.shape = {static_cast<int64_t>(chunk->count)};
  request.input = op->pinned + chunk->offset * op->element();
  request.output = const_cast<void*>(request.input);
  request.priority = op->priority;
  request.mover = op->mover;
  request.done = [this, op, chunk](const Status& status) { OnChunkSummed(op, chunk, status); };
  engine_->Enqueue(std::move(request));
}

void GpuPushPull::OnChunkSummed(const std::shared_ptr<Operation>& op, Chunk* chunk, const Status& status) {
  Status copied = status;
  if (copied.ok() && op->mover == nullptr) {  // (a mover has copied the sum to the GPUs already)
    for (const Piece& piece : chunk->pieces) {
      const GpuTensor& member = op->members[piece.member];
      copied = CudaStatus(cudaSetDevice(member.device), "cudaSetDevice");
      if (!copied.ok()) break;
      copied = CudaStatus(cudaMemcpyAsync(op->device_data(piece.member, piece.offset),
                                          op->pinned + piece.offset * op->element(), piece.count * op->element(),
                                          cudaMemcpyHostToDevice, h2d_streams_[piece.member]),
                          "cudaMemcpyAsync (host to device)");
      if (!copied.ok()) break;
    }
  }
  if (!copied.ok()) {
    std::lock_guard<std::mutex> lock(op->mu);
    if (op->status.ok()) op->status = copied;
  }
  if (--op->chunks_pending > 0) return;
  op->summed_at = NowSeconds();
  Status result;
  {
    std::lock_guard<std::mutex> lock(op->mu);
    result = op->status;
  }
  if (!result.ok()) return Complete(op, result);
  Finish(op);
}

void GpuPushPull::Finish(const std::shared_ptr<Operation>& op) {
  InOrder(op, "gather", [this, op] {
    Complete(op, FinishOnDevices(op));
    return Status::OK();
  });
}

// After the sums are back on the GPUs: the local broadcast (or all-gather), then the framework's streams
// wait for it.
Status GpuPushPull::FinishOnDevices(const std::shared_ptr<Operation>& op) {
  const int local = static_cast<int>(op->members.size());
  std::vector<DeviceSpan> spans;
  for (int i = 0; i < local; ++i) {
    for (int j = 0; j < local; ++j) {  // every member's main stream waits for every host-to-device copy
      BPS_RETURN_IF_ERROR(StreamWaits(main_streams_[i], op->members[j].device, h2d_streams_[j]));
    }
    spans.push_back({op->members[i].device, op->members[i].data, main_streams_[i]});
  }
  if (options_.distributed && nccl_->size() > 1 && op->count > 0) {
    if (options_.mode == LocalReduceMode::kReduceScatter) {
      if (op->scatter_count > 0) BPS_RETURN_IF_ERROR(nccl_->AllGather(spans, op->dtype, op->scatter_count));
      if (op->scatter_count < op->count) {
        for (auto& span : spans) span.data = static_cast<char*>(span.data) + op->scatter_count * op->element();
        BPS_RETURN_IF_ERROR(nccl_->Broadcast(spans, op->dtype, op->count - op->scatter_count, 0));
      }
    } else {
      BPS_RETURN_IF_ERROR(nccl_->Broadcast(spans, op->dtype, op->count, 0));
    }
  }
  for (int i = 0; i < local; ++i) {
    BPS_RETURN_IF_ERROR(StreamWaits(op->members[i].stream, op->members[i].device, main_streams_[i]));
  }
  if (Timeline::OfProcess().on() && local > 0) {
    // A host callback only while tracing: the copies back and the local broadcast, as the first GPU sees them.
    BPS_RETURN_IF_ERROR(StreamWaits(notify_streams_[0], op->members[0].device, main_streams_[0]));
    BPS_RETURN_IF_ERROR(WhenReached(notify_streams_[0], [op] {
      Timeline::OfProcess().Span(op->name, "COPY_H2D_BROADCAST", op->summed_at, NowSeconds());
    }));
  }
  return Status::OK();
}

void GpuPushPull::Complete(const std::shared_ptr<Operation>& op, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(op->mu);
    if (op->completed) return;
    op->completed = true;
  }
  for (cudaEvent_t event : op->ready) {
    if (event != nullptr) cudaEventDestroy(event);  // never waited on: failed before that
  }
  op->ready.clear();
  // The whole GPU push_pull: its chunks' push_pulls in the engine are counted within it.
  CommunicationCounters::OfProcess().PushPullEnded(op->started_at);
  Status result = status;
  if (!result.ok()) result = Status(result.code(), "GPU push_pull of '" + op->name + "': " + result.message());
  op->done(result);
}

}  // namespace cuda
}  // namespace bps

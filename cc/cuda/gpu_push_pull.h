// push_pull of GPU tensors: NCCL reduction among the machine's GPUs, then each chunk pushed and pulled
// through the servers, copied by the GPU straight to where it goes on the host (a same-host server's shared
// memory, or pinned staging for the transport) and its sum straight back (direct_copies: a GpuDataMover);
// or (staged) copied to pinned host memory chunk by chunk, each chunk pushed as soon as it is there, and
// copied back; then NCCL broadcast. The framework's streams wait on CUDA events; the framework's threads
// never block on the GPU.
//
// Both process models: one process driving all of the machine's GPUs, or one process per GPU. In the
// second, every NCCL call is ordered through the machine's LocalCoordinator (NCCL needs one order in all
// processes), and each process pushes only the part of the sum its GPU holds, as a per-machine tensor.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cc/common/dtype.h"
#include "cc/common/status.h"
#include "cc/common/work_thread.h"
#include "cc/cuda/gpu_data_mover.h"
#include "cc/cuda/local_nccl.h"
#include "cc/cuda/pinned_staging.h"
#include "cc/runtime/engine.h"
#include "cc/cuda/local_coordinator.h"

namespace bps {
namespace cuda {

// Measured on 2 H200s (docs/gpu.md): reduce-scatter + all-gather takes 1.20x the time of NCCL all-reduce
// of the same bytes, reduce + broadcast 1.62-1.65x; reduce-scatter also copies to the host over every GPU's
// link at once. So reduce-scatter is the default; reduce-to-root stays for comparison.
enum class LocalReduceMode {
  // NCCL reduce-scatter, every GPU copies its slice (all PCIe links busy), all-gather back; a tensor under
  // kWholeBelowBytesPerGpu per GPU as kReduceToRoot.
  kReduceScatter,
  kReduceToRoot,   // NCCL reduce to GPU 0, one copy stream to the host, NCCL broadcast back
};

// With one process per GPU, a tensor whose slice per GPU would be smaller than this is reduced to GPU 0,
// pushed whole by its process and broadcast back: each slice would cost a server a push and a reply from every machine, and at scale
// the servers' messages, not their bytes, bound the step (docs/performance.md section 6); pushed by one
// process, small tensors also travel fused. Its copies are few bytes, so GPU 0's link hardly notices.
constexpr uint64_t kWholeBelowBytesPerGpu = 262144;

// With direct_copies, a tensor smaller than this still goes through the pinned staging by default: each
// direct copy is waited for on an event, which with two processes sharing a GPU costs tens of microseconds a
// tensor, where the staged path copies back without waiting. Two workers sharing an H100, an encoder's 123
// gradients of 3 to 12 KB all in flight at once: 7.7-13.0 ms direct against 2.9-3.0 ms staged (gpu_job
// bench_encoder, docs/gpu/line_rate/encoder_set_async_copies_all_direct_h100.txt). The staging's two host
// copies cost about as much for 512 KiB (60 us at 17 GB/s); above it, fewer copies win.
constexpr uint64_t kDirectCopiesFromBytes = 512 * 1024;

struct GpuPushPullOptions {
  size_t chunk_bytes = 4096000;  // copy and network granularity (BYTEPS_PARTITION_BYTES)
  LocalReduceMode mode = LocalReduceMode::kReduceScatter;
  bool distributed = true;       // through the servers; false on a single worker machine (local NCCL only)
  // Copies between the GPUs and where the bytes go on the host (a same-host server's shared memory, or the
  // pinned staging for the transport) through a DataMover, once the local reduction is done, for tensors of
  // direct_copies_from_bytes and more; false, and for smaller tensors: every chunk is copied to the pinned
  // staging (the engine then copies it on into shared memory) and back.
  bool direct_copies = true;
  uint64_t direct_copies_from_bytes = kDirectCopiesFromBytes;
};

// One local replica of the tensor: its GPU, its data, and the framework stream that produces it.
struct GpuTensor {
  int device;
  void* data;
  cudaStream_t stream;
};

class GpuPushPull {
 public:
  // `nccl` spans the machine's GPUs; `engine` may be null when not distributed; `coordinator` is needed
  // when `nccl` spans processes.
  GpuPushPull(Engine* engine, LocalNccl* nccl, LocalCoordinator* coordinator, GpuPushPullOptions options);
  ~GpuPushPull();
  GpuPushPull(const GpuPushPull&) = delete;
  GpuPushPull& operator=(const GpuPushPull&) = delete;

  Status Init();

  // Sums `count` elements across every NCCL member (this process's members[i] on nccl->devices()[i]) and
  // every worker machine; each buffer ends with the sum. `done` runs once each member's stream waits for
  // the result. Every process of the machine must Run the same names.
  void Run(const std::string& name, DataType dtype, uint64_t count, int priority, std::vector<GpuTensor> members,
           std::function<void(const Status&)> done);

  const GpuPushPullOptions& options() const { return options_; }

 private:
  struct Operation;
  struct Chunk;

  Status Start(const std::shared_ptr<Operation>& op);
  void InOrder(const std::shared_ptr<Operation>& op, const std::string& step, std::function<Status()> issue);
  Status ReduceLocally(const std::shared_ptr<Operation>& op);
  void PlanChunks(const std::shared_ptr<Operation>& op);
  Status StageToHost(const std::shared_ptr<Operation>& op);
  // With direct_copies: once every GPU holding a part of the sum has reduced it, the chunks go to the engine
  // with a mover that copies them (from a thread of ours: never CUDA's callback thread).
  Status EnqueueWhenReduced(const std::shared_ptr<Operation>& op);
  void OnChunkOnHost(const std::shared_ptr<Operation>& op, Chunk* chunk);
  void OnChunkSummed(const std::shared_ptr<Operation>& op, Chunk* chunk, const Status& status);
  void Finish(const std::shared_ptr<Operation>& op);
  Status FinishOnDevices(const std::shared_ptr<Operation>& op);
  void Complete(const std::shared_ptr<Operation>& op, const Status& status);

  Engine* engine_;
  LocalNccl* nccl_;
  LocalCoordinator* coordinator_;
  GpuPushPullOptions options_;
  PinnedStaging staging_;
  std::vector<cudaStream_t> main_streams_;  // per GPU: NCCL and device-to-host copies, in order
  std::vector<cudaStream_t> h2d_streams_;   // per GPU: host-to-device copies, overlapping the next D2H
  // per GPU: where host callbacks wait for copies, so a callback never stalls the copies behind it
  std::vector<cudaStream_t> notify_streams_;
  std::shared_ptr<CopyStreams> copy_streams_;  // the movers' (direct_copies)
  // Enqueues direct chunks: the engine may start partitions inline, and their mover calls CUDA (which CUDA's
  // callback thread may not). Stopped in the destructor once no callback can post to it any more.
  WorkThread enqueuer_;
};

}  // namespace cuda
}  // namespace bps

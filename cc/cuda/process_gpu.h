// The process's GPU push_pull (created on first use): the door the TF GPU kernels go through. Two process
// models: one process driving several GPUs (BytePSStrategy's mirrored replicas meet in a local rendezvous),
// or one process per GPU (BYTEPS_LOCAL_SIZE > 1: the machine's processes share one NCCL communicator, whose
// id local rank 0 hands out through the LocalCoordinator). Distributed when there is more than one worker
// machine, or when forced (BYTEPS_FORCE_DISTRIBUTED=1); otherwise the local NCCL all-reduce is the whole job.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cc/cuda/gpu_push_pull.h"

namespace bps {
namespace cuda {

// What one GPU push_pull needs: the NCCL communicator over the machine's GPUs, the coordinator when other
// processes hold members of it, and the pipeline.
struct GpuGroup {
  std::unique_ptr<LocalCoordinator> coordinator;
  std::unique_ptr<LocalNccl> nccl;
  std::unique_ptr<GpuPushPull> push_pull;
};

// Builds the group for `devices` (this process's GPUs) in the engine's job (the engine must outlive it): with BYTEPS_LOCAL_SIZE > 1,
// `devices` must be this process's one GPU, and every local process must call this (it waits for them,
// up to BYTEPS_TIMEOUT).
StatusOr<std::unique_ptr<GpuGroup>> CreateGpuGroup(Engine* engine, const std::vector<int>& devices,
                                                   GpuPushPullOptions options);

// Options from the engine's configuration (chunk size, whether the servers take part).
GpuPushPullOptions DefaultGpuOptions(const Engine& engine);

// Sums `member` with the other `local_devices - 1` replicas of `name` in this process (each on its own GPU),
// with the other processes of this machine and with every other worker. `done` runs once member.stream
// waits for the result.
void ProcessGpuPushPull(const std::string& name, DataType dtype, uint64_t count, int priority, int local_devices,
                        GpuTensor member, std::function<void(const Status&)> done);

}  // namespace cuda
}  // namespace bps

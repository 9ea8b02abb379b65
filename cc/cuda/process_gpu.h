// The process's GPU push_pull, one per set of local GPUs (created on first use): the door the TF GPU
// kernels go through. Distributed when the job has more than one worker process, or when forced
// (BYTEPS_FORCE_DISTRIBUTED=1); otherwise the local NCCL all-reduce is the whole job.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cc/cuda/gpu_push_pull.h"

namespace bps {
namespace cuda {

// Sums `member` with the other `local_devices - 1` replicas of `name` in this process (each on its own GPU)
// and with every other worker. `done` runs once member.stream waits for the result.
void ProcessGpuPushPull(const std::string& name, DataType dtype, uint64_t count, int priority, int local_devices,
                        GpuTensor member, std::function<void(const Status&)> done);

}  // namespace cuda
}  // namespace bps

#include "cc/cuda/gpu_data_mover.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "cc/common/clock.h"
#include "cc/cuda/cuda_status.h"
#include "cc/cuda/host_registry.h"

namespace bps {
namespace cuda {
namespace {

// Waits until `stream` has run everything queued on it, or `deadline` passes (cudaStreamSynchronize has no
// timeout). Polls without sleeping for the first 2 ms, which covers a chunk's copy, then every 100 us.
Status AwaitStream(cudaStream_t stream, const Deadline& deadline, double timeout_s) {
  const double spin_until = NowSeconds() + 0.002;
  while (true) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return Status::OK();
    if (state != cudaErrorNotReady) return CudaStatus(state, "cudaStreamQuery");
    if (deadline.expired()) {
      return DeadlineExceeded("a copy between a GPU and host memory did not finish within BYTEPS_TIMEOUT=" +
                              std::to_string(timeout_s) +
                              " s: the GPU is hung or far too busy (nvidia-smi shows its state)");
    }
    if (NowSeconds() < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

}  // namespace

CopyStreams::~CopyStreams() {
  for (auto& [device, stream] : all_) {
    cudaSetDevice(device);
    cudaStreamDestroy(stream);
  }
}

StatusOr<cudaStream_t> CopyStreams::Take(int device) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<cudaStream_t>& idle = idle_[device];
    if (!idle.empty()) {
      cudaStream_t stream = idle.back();
      idle.pop_back();
      return stream;
    }
  }
  cudaStream_t stream;
  BPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::lock_guard<std::mutex> lock(mu_);
  all_.emplace_back(device, stream);
  return stream;
}

void CopyStreams::Give(int device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_[device].push_back(stream);
}

GpuDataMover::GpuDataMover(std::shared_ptr<CopyStreams> streams, char* staging, size_t element,
                           std::vector<DeviceRun> runs, double timeout_s)
    : streams_(std::move(streams)), staging_(staging), element_(element), timeout_s_(timeout_s), runs_([&] {
        std::sort(runs.begin(), runs.end(), [](const DeviceRun& a, const DeviceRun& b) { return a.offset < b.offset; });
        return std::move(runs);
      }()) {}

Status GpuDataMover::ToHost(const void* staged, void* host, size_t bytes) {
  const char* at = static_cast<const char*>(staged);
  char* to = static_cast<char*>(host);
  std::vector<const char*> seams;
  if (to == at || HostRegistry::OfProcess().Register(to, bytes, &seams)) {
    return Copy(at, to, bytes, /*to_host=*/true, seams);
  }
  // Not registered: through the staging, then a host copy.
  BPS_RETURN_IF_ERROR(Copy(at, const_cast<char*>(at), bytes, /*to_host=*/true));
  std::memcpy(to, at, bytes);
  return Status::OK();
}

Status GpuDataMover::FromHost(void* staged, const void* host, size_t bytes) {
  char* at = static_cast<char*>(staged);
  const char* from = static_cast<const char*>(host);
  std::vector<const char*> seams;
  if (from != at && !HostRegistry::OfProcess().Register(from, bytes, &seams)) {
    std::memcpy(at, from, bytes);  // not registered: a host copy into the staging first
    from = at;
  }
  return Copy(at, const_cast<char*>(from), bytes, /*to_host=*/false, seams);
}

Status GpuDataMover::Copy(const char* staged, char* host, size_t bytes, bool to_host,
                          const std::vector<const char*>& seams) {
  if (staged < staging_ || (staged - staging_) % element_ != 0 || bytes % element_ != 0) {
    return Internal("a GPU copy was asked for bytes that are not whole elements of the staged tensor");
  }
  const uint64_t begin = static_cast<uint64_t>(staged - staging_) / element_;
  const uint64_t end = begin + bytes / element_;
  std::vector<std::pair<int, cudaStream_t>> used;
  Status status;
  uint64_t covered = 0;
  for (const DeviceRun& run : runs_) {
    const uint64_t from = std::max(begin, run.offset), to = std::min(end, run.offset + run.count);
    if (from >= to) continue;
    covered += to - from;
    status = CudaStatus(cudaSetDevice(run.device), "cudaSetDevice");
    if (!status.ok()) break;
    auto stream = streams_->Take(run.device);
    if (!stream.ok()) {
      status = stream.status();
      break;
    }
    used.emplace_back(run.device, stream.value());
    char* device = run.data + (from - run.offset) * element_;
    char* on_host = host + (from - begin) * element_;
    char* const host_end = on_host + (to - from) * element_;
    auto seam = std::upper_bound(seams.begin(), seams.end(), static_cast<const char*>(on_host));
    while (status.ok() && on_host < host_end) {
      char* const piece_end = seam != seams.end() && *seam < host_end ? const_cast<char*>(*seam++) : host_end;
      const size_t n = piece_end - on_host;
      status = to_host ? CudaStatus(cudaMemcpyAsync(on_host, device, n, cudaMemcpyDeviceToHost, stream.value()),
                                    "cudaMemcpyAsync (device to host)")
                       : CudaStatus(cudaMemcpyAsync(device, on_host, n, cudaMemcpyHostToDevice, stream.value()),
                                    "cudaMemcpyAsync (host to device)");
      if (!status.ok()) {
        status = Status(status.code(), status.message() + " (" + std::to_string(n) + " bytes, host " +
                                            std::to_string(reinterpret_cast<uintptr_t>(on_host)) + ", GPU " +
                                            std::to_string(run.device) + ")");
      }
      device += n;
      on_host = piece_end;
    }
    if (!status.ok()) break;
  }
  // Every stream that took a copy is waited for, also after a failure, so that none still writes when we
  // return; except one that outlives the timeout: it is not reused, and the copy fails with
  // DeadlineExceeded, on which the worker aborts the job (it may still write into the next rounds' memory).
  const Deadline deadline(timeout_s_);
  for (auto& [device, stream] : used) {
    cudaSetDevice(device);
    Status synced = AwaitStream(stream, deadline, timeout_s_);
    if (status.ok()) status = synced;
    if (synced.code() != Code::kDeadlineExceeded) streams_->Give(device, stream);
  }
  if (status.ok() && covered != end - begin) {
    return Internal("a GPU copy was asked for " + std::to_string(end - begin) + " elements at " +
                    std::to_string(begin) + ", of which only " + std::to_string(covered) + " are on this GPU");
  }
  return status;
}

}  // namespace cuda
}  // namespace bps

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

// Waits until the GPU has passed `event`, or `deadline` passes (cudaEventSynchronize has no timeout). Polls
// without sleeping for the first 2 ms, which covers a chunk's copy, then every 100 us.
Status AwaitEvent(cudaEvent_t event, const Deadline& deadline, double timeout_s) {
  const double spin_until = NowSeconds() + 0.002;
  while (true) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return Status::OK();
    if (state != cudaErrorNotReady) return CudaStatus(state, "cudaEventQuery");
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

// Where a stream that took copies is to have got: the wait polls the event.
struct Passed {
  int device;
  cudaStream_t stream;
  cudaEvent_t event;
};

// Records an event after what `stream` (of `device`, current) has queued and gives the stream back for the
// next copy to queue behind; without an event, the stream is synchronized here instead (and dropped if
// that fails too).
Status RecordAndGiveBack(CopyStreams* streams, int device, bool to_host, cudaStream_t stream,
                         std::vector<Passed>* passed) {
  cudaEvent_t event;
  Status recorded = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  if (recorded.ok()) {
    recorded = CudaStatus(cudaEventRecord(event, stream), "cudaEventRecord");
    if (recorded.ok()) {
      passed->push_back({device, stream, event});
    } else {
      cudaEventDestroy(event);
    }
  }
  if (recorded.ok() || cudaStreamSynchronize(stream) == cudaSuccess) streams->Give(device, to_host, stream);
  return recorded;
}

// Waits for every event in `passed` (each released after), also after a failure, so that no copy still
// writes when this returns; one past `deadline` fails with DeadlineExceeded, and its stream is retired.
Status AwaitAll(const std::vector<Passed>& passed, CopyStreams* streams, const Deadline& deadline, double timeout_s) {
  Status result;
  for (const Passed& p : passed) {
    Status waited = AwaitEvent(p.event, deadline, timeout_s);
    if (waited.code() == Code::kDeadlineExceeded) streams->Retire(p.stream);
    if (result.ok()) result = waited;
    cudaSetDevice(p.device);
    cudaEventDestroy(p.event);
  }
  return result;
}

}  // namespace

CopyStreams::~CopyStreams() {
  for (auto& [device, stream] : all_) {
    cudaSetDevice(device);
    cudaStreamDestroy(stream);
  }
}

StatusOr<cudaStream_t> CopyStreams::Take(int device, bool to_host) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<cudaStream_t>& idle = idle_[{device, to_host}];
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

void CopyStreams::Give(int device, bool to_host, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (retired_.count(stream) == 0) idle_[{device, to_host}].push_back(stream);
}

void CopyStreams::Retire(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  retired_.insert(stream);
  for (auto& [key, idle] : idle_) idle.erase(std::remove(idle.begin(), idle.end(), stream), idle.end());
}

GpuDataMover::GpuDataMover(std::shared_ptr<CopyStreams> streams, char* staging, size_t element,
                           std::vector<DeviceRun> runs, double timeout_s)
    : streams_(std::move(streams)), staging_(staging), element_(element), timeout_s_(timeout_s), runs_([&] {
        std::sort(runs.begin(), runs.end(), [](const DeviceRun& a, const DeviceRun& b) { return a.offset < b.offset; });
        return std::move(runs);
      }()) {}

DataMover::InFlight GpuDataMover::StartToHost(const void* staged, void* host, size_t bytes) {
  const char* at = static_cast<const char*>(staged);
  char* to = static_cast<char*>(host);
  std::vector<const char*> seams;
  if (to == at || HostRegistry::OfProcess().Register(to, bytes, &seams)) return Start(at, to, bytes, true, seams);
  // Not registered: through the staging, then a host copy, done here.
  Status copied = Start(at, const_cast<char*>(at), bytes, /*to_host=*/true)();
  if (copied.ok()) std::memcpy(to, at, bytes);
  return [copied] { return copied; };
}

DataMover::InFlight GpuDataMover::StartFromHost(void* staged, const void* host, size_t bytes) {
  char* at = static_cast<char*>(staged);
  const char* from = static_cast<const char*>(host);
  std::vector<const char*> seams;
  if (from != at && !HostRegistry::OfProcess().Register(from, bytes, &seams)) {
    std::memcpy(at, from, bytes);  // not registered: a host copy into the staging first
    from = at;
  }
  return Start(at, const_cast<char*>(from), bytes, /*to_host=*/false, seams);
}

Status GpuDataMover::Queue(const DeviceRun& run, uint64_t from, uint64_t to, uint64_t begin, char* host,
                           bool to_host, const std::vector<const char*>& seams, cudaStream_t stream) {
  char* device = run.data + (from - run.offset) * element_;
  char* on_host = host + (from - begin) * element_;
  char* const host_end = on_host + (to - from) * element_;
  auto seam = std::upper_bound(seams.begin(), seams.end(), static_cast<const char*>(on_host));
  while (on_host < host_end) {
    char* const piece_end = seam != seams.end() && *seam < host_end ? const_cast<char*>(*seam++) : host_end;
    const size_t n = piece_end - on_host;
    Status status = to_host ? CudaStatus(cudaMemcpyAsync(on_host, device, n, cudaMemcpyDeviceToHost, stream),
                                         "cudaMemcpyAsync (device to host)")
                            : CudaStatus(cudaMemcpyAsync(device, on_host, n, cudaMemcpyHostToDevice, stream),
                                         "cudaMemcpyAsync (host to device)");
    if (!status.ok()) {
      return Status(status.code(), status.message() + " (" + std::to_string(n) + " bytes, host " +
                                       std::to_string(reinterpret_cast<uintptr_t>(on_host)) + ", GPU " +
                                       std::to_string(run.device) + ")");
    }
    device += n;
    on_host = piece_end;
  }
  return Status::OK();
}

DataMover::InFlight GpuDataMover::Start(const char* staged, char* host, size_t bytes, bool to_host,
                                        const std::vector<const char*>& seams) {
  if (staged < staging_ || (staged - staging_) % element_ != 0 || bytes % element_ != 0) {
    Status refused = Internal("a GPU copy was asked for bytes that are not whole elements of the staged tensor");
    return [refused] { return refused; };
  }
  const uint64_t begin = static_cast<uint64_t>(staged - staging_) / element_;
  const uint64_t end = begin + bytes / element_;
  std::vector<Passed> passed;
  Status status;
  uint64_t covered = 0;
  for (const DeviceRun& run : runs_) {
    const uint64_t from = std::max(begin, run.offset), to = std::min(end, run.offset + run.count);
    if (from >= to) continue;
    covered += to - from;
    status = CudaStatus(cudaSetDevice(run.device), "cudaSetDevice");
    if (!status.ok()) break;
    auto stream = streams_->Take(run.device, to_host);
    if (!stream.ok()) {
      status = stream.status();
      break;
    }
    status = Queue(run, from, to, begin, host, to_host, seams, stream.value());
    // Also after a failure: the wait covers what did start.
    Status recorded = RecordAndGiveBack(streams_.get(), run.device, to_host, stream.value(), &passed);
    if (status.ok()) status = recorded;
    if (!status.ok()) break;
  }
  if (status.ok() && covered != end - begin) {
    status = Internal("a GPU copy was asked for " + std::to_string(end - begin) + " elements at " +
                      std::to_string(begin) + ", of which only " + std::to_string(covered) + " are on this GPU");
  }
  // A copy that outlives the timeout fails with DeadlineExceeded, on which the worker aborts the job: it may
  // still write into the next rounds' memory.
  return [passed = std::move(passed), status, streams = streams_, deadline = Deadline(timeout_s_),
          timeout_s = timeout_s_] {
    Status waited = AwaitAll(passed, streams.get(), deadline, timeout_s);
    return status.ok() ? waited : status;
  };
}

}  // namespace cuda
}  // namespace bps

// GPU benchmark, each figure beside its reference measured in the same run on the same buffers:
// 1. the chunked pinned copies GPU push_pull makes (async copies + a host callback per chunk) against one
//    plain cudaMemcpy of the whole buffer (the copy engine's peak);
// 2. the two local reductions (reduce to GPU 0 + broadcast; reduce-scatter + all-gather) against plain NCCL
//    all-reduce of the same bytes, on 2, 4 and 8 GPUs (as many as there are).
// Prints one JSON object per line.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cc/cuda/cuda_status.h"
#include "cc/cuda/local_nccl.h"
#include "cc/cuda/test_kernels.h"

namespace bps {
namespace cuda {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <typename Fn>
double MedianSeconds(int runs, Fn fn) {
  fn();  // warm up
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    double start = Now();
    fn();
    t.push_back(Now() - start);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void CUDART_CB CountDown(void* data) { --*static_cast<std::atomic<int>*>(data); }

void BenchCopies(uint64_t bytes, uint64_t chunk) {
  void *device = nullptr, *pinned = nullptr;
  cudaSetDevice(0);
  cudaMalloc(&device, bytes);
  cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable);
  LaunchFill(DataType::kFloat32, device, bytes / 4, 0, nullptr);
  cudaDeviceSynchronize();
  cudaStream_t stream, notify;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&notify, cudaStreamNonBlocking);
  std::vector<cudaEvent_t> events(bytes / chunk + 1);
  for (auto& e : events) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  for (cudaMemcpyKind kind : {cudaMemcpyDeviceToHost, cudaMemcpyHostToDevice}) {
    void* dst = kind == cudaMemcpyDeviceToHost ? pinned : device;
    void* src = kind == cudaMemcpyDeviceToHost ? device : pinned;
    double plain = MedianSeconds(9, [&] { cudaMemcpy(dst, src, bytes, kind); });
    // As GPU push_pull does: each chunk's host callback waits on a side stream, not behind the copies.
    double chunked = MedianSeconds(9, [&] {
      std::atomic<int> pending{0};
      size_t i = 0;
      for (uint64_t off = 0; off < bytes; off += chunk, ++i) {
        uint64_t n = std::min(chunk, bytes - off);
        cudaMemcpyAsync(static_cast<char*>(dst) + off, static_cast<char*>(src) + off, n, kind, stream);
        cudaEventRecord(events[i], stream);
        cudaStreamWaitEvent(notify, events[i], 0);
        ++pending;
        cudaLaunchHostFunc(notify, CountDown, &pending);
      }
      while (pending.load() > 0) {
      }
    });
    std::printf("{\"bench\": \"pinned_copy\", \"direction\": \"%s\", \"bytes\": %llu, \"chunk_bytes\": %llu, "
                "\"plain_memcpy_GBps\": %.2f, \"chunked_async_GBps\": %.2f, \"ratio\": %.3f}\n",
                kind == cudaMemcpyDeviceToHost ? "D2H" : "H2D", (unsigned long long)bytes, (unsigned long long)chunk,
                bytes / plain / 1e9, bytes / chunked / 1e9, plain / chunked);
  }
  for (auto& e : events) cudaEventDestroy(e);
  cudaStreamDestroy(stream);
  cudaStreamDestroy(notify);
  cudaFree(device);
  cudaFreeHost(pinned);
}

// On the first `gpus` GPUs.
void BenchLocalReduce(int gpus, uint64_t bytes) {
  std::vector<int> devices;
  for (int d = 0; d < gpus; ++d) devices.push_back(d);
  auto nccl = LocalNccl::ForDevices(devices);
  if (!nccl.ok()) {
    std::printf("{\"bench\": \"local_reduce\", \"error\": \"%s\"}\n", nccl.status().ToString().c_str());
    return;
  }
  std::vector<DeviceSpan> spans;
  for (int d : devices) {
    cudaSetDevice(d);
    void* data = nullptr;
    cudaMalloc(&data, bytes);
    LaunchFill(DataType::kFloat32, data, bytes / 4, d, nullptr);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    spans.push_back({d, data, stream});
  }
  auto sync = [&] {
    for (auto& s : spans) {
      cudaSetDevice(s.device);
      cudaStreamSynchronize(s.stream);
    }
  };
  const uint64_t count = bytes / 4;
  LocalNccl& n = *nccl.value();
  // A failed NCCL call would make every figure below meaningless: stop there.
  auto must = [](const Status& s) {
    if (!s.ok()) DieBecause("gpu_bench: " + s.ToString());
  };
  double all_reduce = MedianSeconds(9, [&] { must(n.AllReduce(spans, DataType::kFloat32, count)); sync(); });
  double root = MedianSeconds(9, [&] {
    must(n.Reduce(spans, DataType::kFloat32, count, 0));
    must(n.Broadcast(spans, DataType::kFloat32, count, 0));
    sync();
  });
  double scatter = MedianSeconds(9, [&] {
    must(n.ReduceScatter(spans, DataType::kFloat32, count));
    must(n.AllGather(spans, DataType::kFloat32, count));
    sync();
  });
  std::printf("{\"bench\": \"local_reduce\", \"gpus\": %d, \"bytes\": %llu, \"nccl_all_reduce_ms\": %.3f, "
              "\"reduce_broadcast_ms\": %.3f, \"reduce_scatter_all_gather_ms\": %.3f, "
              "\"reduce_broadcast_over_all_reduce\": %.3f, \"reduce_scatter_over_all_reduce\": %.3f}\n",
              gpus, (unsigned long long)bytes, all_reduce * 1e3, root * 1e3, scatter * 1e3, root / all_reduce,
              scatter / all_reduce);
  for (auto& s : spans) {
    cudaSetDevice(s.device);
    cudaFree(s.data);
    cudaStreamDestroy(s.stream);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace bps

int main() {
  for (uint64_t bytes : {uint64_t(64) << 20, uint64_t(256) << 20}) {
    bps::cuda::BenchCopies(bytes, 4096000);
  }
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  if (gpus < 2) std::printf("{\"bench\": \"local_reduce\", \"skipped\": \"needs 2 GPUs, found %d\"}\n", gpus);
  // 2, 4 and 8 GPUs, as many as the machine has.
  for (int n = 2; n <= gpus && n <= 8; n *= 2) {
    for (uint64_t bytes : {uint64_t(4) << 20, uint64_t(64) << 20, uint64_t(256) << 20}) {
      bps::cuda::BenchLocalReduce(n, bytes);
    }
  }
  return 0;
}

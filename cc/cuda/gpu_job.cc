// One process of a GPU job over real network connections (bps_tf's TCP transport by default; UCX with
// BYTEPS_TRANSPORT=ucx or DMLC_ENABLE_RDMA=1), for scripts/gpu_check.sh: the scheduler or a server
// (by DMLC_ROLE), or a worker that push_pulls GPU tensors and checks them exactly ("check"), or times the
// GPU push_pull against the sum of its stages ("bench"), or an encoder's gradients all in flight at once
// ("bench_encoder").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cc/cuda/cuda_status.h"
#include "cc/cuda/gpu_push_pull.h"
#include "cc/cuda/process_gpu.h"
#include "cc/cuda/test_kernels.h"
#include "cc/common/chunk_helpers.h"
#include "cc/ps/shared_pushes.h"
#include "cc/reducer/parallel_reducer.h"
#include "cc/runtime/process_engine.h"

namespace bps {
namespace cuda {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "gpu_job: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

struct Worker {
  std::shared_ptr<Engine> engine;
  int rank;
  int size;
  int device;
  cudaStream_t stream;
  std::unique_ptr<GpuGroup> group;
  GpuPushPull* push_pull = nullptr;
};

Status RunOnce(Worker& w, const std::string& name, DataType dtype, uint64_t count, void* data) {
  std::promise<Status> done;
  w.push_pull->Run(name, dtype, count, 0, {{w.device, data, w.stream}}, [&](const Status& s) { done.set_value(s); });
  auto future = done.get_future();
  if (future.wait_for(std::chrono::seconds(120)) != std::future_status::ready) return DeadlineExceeded("no answer");
  BPS_RETURN_IF_ERROR(future.get());
  return CudaStatus(cudaStreamSynchronize(w.stream), "cudaStreamSynchronize");
}

// The gradients of a BERT-base-sized encoder (110M float32 parameters, 440 MB) in the order a backward
// pass produces them: per layer, from the last, the layer norms, the feed-forward and attention kernels and
// their biases; the embeddings last. 123 of the 197 are biases and layer norms of 3 to 12 KB.
std::vector<uint64_t> EncoderGradientCounts() {
  const uint64_t hidden = 768, ffn = 3072;
  std::vector<uint64_t> counts;
  for (int layer = 0; layer < 12; ++layer) {
    for (uint64_t n : {hidden, hidden, hidden * ffn, hidden, ffn * hidden, ffn, hidden, hidden, hidden * hidden,
                       hidden, hidden * hidden, hidden, hidden * hidden, hidden, hidden * hidden, hidden}) {
      counts.push_back(n);
    }
  }
  for (uint64_t n : {hidden, hidden, 2 * hidden, 512 * hidden, 30522 * hidden}) counts.push_back(n);
  return counts;
}

// The push_pulls of float32 tensors of `counts` elements at `data`, all started at once, as a training step
// starts them: OK once every one is done.
Status RunAll(Worker& w, const std::string& prefix, const std::vector<uint64_t>& counts,
              const std::vector<void*>& data) {
  // Held by the callbacks too: one that comes after the wait below gave up finds its promise still there.
  std::vector<std::shared_ptr<std::promise<Status>>> done;
  for (size_t i = 0; i < counts.size(); ++i) {
    done.push_back(std::make_shared<std::promise<Status>>());
    w.push_pull->Run(prefix + std::to_string(i), DataType::kFloat32, counts[i], 0, {{w.device, data[i], w.stream}},
                     [promise = done.back()](const Status& s) { promise->set_value(s); });
  }
  Status result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);  // for all of them
  for (auto& d : done) {
    auto future = d->get_future();
    Status s = future.wait_until(deadline) == std::future_status::ready ? future.get() : DeadlineExceeded("no answer");
    if (result.ok()) result = s;
  }
  BPS_RETURN_IF_ERROR(result);
  return CudaStatus(cudaStreamSynchronize(w.stream), "cudaStreamSynchronize");
}

// Every gradient of the encoder in flight at once, three rounds, each sum exact.
int CheckEncoderSet(Worker& w, unsigned long long* mismatches) {
  const std::vector<uint64_t> counts = EncoderGradientCounts();
  std::vector<void*> data(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) cudaMalloc(&data[i], counts[i] * sizeof(float));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < counts.size(); ++i) LaunchFill(DataType::kFloat32, data[i], counts[i], w.rank, w.stream);
    Status s = RunAll(w, "encoder/", counts, data);
    if (!s.ok()) return Fail("encoder set", s);
    for (size_t i = 0; i < counts.size(); ++i) {
      unsigned long long wrong = 0;
      cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), w.stream);
      LaunchCountMismatches(DataType::kFloat32, data[i], counts[i], w.size, mismatches, w.stream);
      cudaMemcpyAsync(&wrong, mismatches, sizeof(wrong), cudaMemcpyDeviceToHost, w.stream);
      s = CudaStatus(cudaStreamSynchronize(w.stream), "check");
      if (!s.ok()) return Fail("encoder set", s);
      if (wrong != 0) {
        std::fprintf(stderr, "gpu_job: encoder tensor %zu (%llu elements) round %d: %llu wrong elements\n", i,
                     (unsigned long long)counts[i], round, wrong);
        return 1;
      }
    }
  }
  for (void* d : data) cudaFree(d);
  std::printf("rank %d: the %zu gradients of an encoder in flight at once exact over 3 rounds\n", w.rank,
              counts.size());
  return 0;
}

int Check(Worker& w) {
  const uint64_t partition = w.engine->config().partition_bytes;
  int cases = 0;
  unsigned long long* mismatches = nullptr;  // on the device
  cudaMalloc(&mismatches, sizeof(*mismatches));
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
                         DataType::kInt32, DataType::kInt64}) {
    const uint64_t per = partition / DataTypeSize(dtype);
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(7), per - 1, per, per + 1, 50000000 / DataTypeSize(dtype)}) {
      void* data = nullptr;
      cudaMalloc(&data, std::max<uint64_t>(1, n * DataTypeSize(dtype)));
      std::string name = std::string(DataTypeName(dtype)) + "/" + std::to_string(n);
      // Twice: a key's first round sets up what later ones use (a server's shared memory on this host).
      for (int round = 0; round < 2; ++round) {
        LaunchFill(dtype, data, n, w.rank, w.stream);
        Status s = RunOnce(w, name, dtype, n, data);
        if (!s.ok()) return Fail(name, s);
        unsigned long long wrong = 0;
        cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), w.stream);
        LaunchCountMismatches(dtype, data, n, w.size, mismatches, w.stream);
        cudaMemcpyAsync(&wrong, mismatches, sizeof(wrong), cudaMemcpyDeviceToHost, w.stream);
        s = CudaStatus(cudaStreamSynchronize(w.stream), "check");
        if (!s.ok()) return Fail(name, s);
        if (wrong != 0) {
          std::fprintf(stderr, "gpu_job: %s round %d: %llu wrong elements\n", name.c_str(), round, wrong);
          return 1;
        }
      }
      cudaFree(data);
      ++cases;
    }
  }
  if (int rc = CheckEncoderSet(w, mismatches); rc != 0) return rc;
  cudaFree(mismatches);
  const Config& config = w.engine->config();
  std::printf("rank %d (machine %d, local rank %d of %d): GPU push_pull of %d processes exact in %d dtype/size "
              "cases (mode %s%s)\n",
              w.rank, config.worker_id, config.local_rank, config.local_size, w.size, cases,
              w.push_pull->options().mode == LocalReduceMode::kReduceScatter ? "reduce-scatter" : "reduce-to-root",
              w.push_pull->options().distributed ? ", through the servers" : ", local NCCL only");
  return 0;
}

// One process driving every local GPU, as BytePSStrategy does: each GPU's replica arrives from its own
// thread (as TF runs one op per device) and meets the others in the core's rendezvous.
int CheckRendezvous(Worker& w, int gpus) {
  const uint64_t n = 3000017;
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
    std::vector<void*> data(gpus);
    std::vector<cudaStream_t> streams(gpus);
    std::vector<std::promise<Status>> done(gpus);
    std::vector<std::thread> threads;
    for (int d = 0; d < gpus; ++d) {
      cudaSetDevice(d);
      cudaMalloc(&data[d], n * DataTypeSize(dtype));
      cudaStreamCreate(&streams[d]);
      LaunchFill(dtype, data[d], n, w.rank * gpus + d, streams[d]);
    }
    std::string name = std::string("rendezvous/") + DataTypeName(dtype);
    for (int d = gpus - 1; d >= 0; --d) {  // arrival order differs from device order
      threads.emplace_back([&, d] {
        ProcessGpuPushPull(name, dtype, n, 0, gpus, {d, data[d], streams[d]},
                           [&done, d](const Status& s) { done[d].set_value(s); });
      });
    }
    for (auto& t : threads) t.join();
    for (int d = 0; d < gpus; ++d) {
      Status s = done[d].get_future().get();
      if (!s.ok()) return Fail(name, s);
      cudaSetDevice(d);
      unsigned long long* mismatches = nullptr;
      unsigned long long wrong = 0;
      cudaMalloc(&mismatches, sizeof(*mismatches));
      cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), streams[d]);
      LaunchCountMismatches(dtype, data[d], n, w.size * gpus, mismatches, streams[d]);
      cudaMemcpyAsync(&wrong, mismatches, sizeof(wrong), cudaMemcpyDeviceToHost, streams[d]);
      cudaStreamSynchronize(streams[d]);
      cudaFree(mismatches);
      if (wrong != 0) {
        std::fprintf(stderr, "gpu_job: %s on GPU %d: %llu wrong elements\n", name.c_str(), d, wrong);
        return 1;
      }
      cudaFree(data[d]);
      cudaStreamDestroy(streams[d]);
    }
  }
  std::printf("rank %d: GPU push_pull of %d local replicas (one per GPU) through the rendezvous exact\n", w.rank,
              gpus);
  return 0;
}

// Median of `runs` timings of fn (seconds).
template <typename Fn>
double Median(int runs, Fn fn) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    double start = Seconds();
    fn();
    times.push_back(Seconds() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The sizes the benchmark times: BPS_BENCH_MB (comma-separated MiB, 1 to 65536), else 4, 64, 256 and 420 MiB
// (about the 440 MB of float32 gradients of a BERT-base-sized encoder).
StatusOr<std::vector<uint64_t>> BenchSizes() {
  const char* list = std::getenv("BPS_BENCH_MB");
  std::string text = list ? list : "4,64,256,420";
  std::vector<uint64_t> sizes;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    char* rest = nullptr;
    const unsigned long long mib = std::strtoull(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || mib < 1 || mib > 65536) {
      return InvalidArgument("BPS_BENCH_MB='" + text + "': give sizes in MiB from 1 to 65536, separated by commas");
    }
    sizes.push_back(mib << 20);
    begin = end + 1;
  }
  return sizes;
}

// Times the GPU push_pull end to end against its stages in the same process: the copies between the GPU and
// pinned memory, the push_pull of the same bytes from pinned memory through the servers, and, as references
// for the parts of that push_pull on this host, what its copies into and out of the server's shared memory
// (one pinned buffer into plain memory, split as a worker splits them) and the server's sum of one
// contribution into another (spread over the host's cores as a server spreads it) cost alone.
int Bench(Worker& w) {
  auto sizes = BenchSizes();
  if (!sizes.ok()) return Fail("sizes", sizes.status());
  // Its copies are split as a worker's into a server's shared memory.
  SharedPushes copies(/*enabled=*/true, /*in_place=*/false);
  ChunkHelpers sum_helpers(w.engine->config().server_sum_threads - 1);
  for (uint64_t bytes : sizes.value()) {
    const uint64_t count = bytes / 4;
    void* data = nullptr;
    void* pinned = nullptr;
    cudaMalloc(&data, bytes);
    cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable);
    std::vector<char> plain(bytes), accumulator(bytes);  // stand-ins for the server's buffers
    LaunchFill(DataType::kFloat32, data, count, w.rank, w.stream);
    std::string name = "bench/" + std::to_string(bytes);
    Status failed;
    auto e2e = [&] {
      Status s = RunOnce(w, name, DataType::kFloat32, count, data);
      if (!s.ok()) failed = s;
    };
    auto d2h = [&] {
      cudaMemcpyAsync(pinned, data, bytes, cudaMemcpyDeviceToHost, w.stream);
      cudaStreamSynchronize(w.stream);
    };
    auto h2d = [&] {
      cudaMemcpyAsync(data, pinned, bytes, cudaMemcpyHostToDevice, w.stream);
      cudaStreamSynchronize(w.stream);
    };
    auto host_push_pull = [&] {  // the same bytes through the servers, already on the host
      std::promise<Status> done;
      PushPullRequest r;
      r.name = name + "/host";
      r.dtype = DataType::kFloat32;
      r.shape = {static_cast<int64_t>(count)};
      r.input = r.output = pinned;
      r.done = [&](const Status& s) { done.set_value(s); };
      w.engine->Enqueue(std::move(r));
      Status s = done.get_future().get();
      if (!s.ok()) failed = s;
    };
    auto host_copy = [&] { copies.Copy(plain.data(), pinned, bytes); };
    auto server_sum = [&] {
      CombineIntoAccumulator(&sum_helpers, ReduceOp::kSum, DataType::kFloat32, accumulator.data(), plain.data(),
                             count);
    };
    e2e();  // warm up: declarations, pinned staging, NCCL
    host_push_pull();
    host_copy();
    server_sum();
    double t_e2e = Median(7, e2e), t_d2h = Median(7, d2h), t_h2d = Median(7, h2d), t_pp = Median(7, host_push_pull);
    double t_copy = Median(7, host_copy), t_sum = Median(7, server_sum);
    if (!failed.ok()) return Fail(name, failed);
    double sum = t_d2h + t_pp + t_h2d;
    auto gbps = [bytes](double seconds) { return bytes / seconds / 1e9; };
    std::printf("{\"rank\": %d, \"direct_copies\": %s, \"bytes\": %llu, \"e2e_ms\": %.3f, \"d2h_ms\": %.3f, "
                "\"push_pull_host_ms\": %.3f, \"h2d_ms\": %.3f, \"stage_sum_ms\": %.3f, "
                "\"e2e_over_stage_sum\": %.3f, \"host_copy_ms\": %.3f, \"server_sum_ms\": %.3f, \"e2e_gb_s\": %.2f, "
                "\"d2h_gb_s\": %.2f, \"push_pull_host_gb_s\": %.2f, \"h2d_gb_s\": %.2f, \"host_copy_gb_s\": %.2f, "
                "\"server_sum_gb_s\": %.2f}\n",
                w.rank, w.push_pull->options().direct_copies ? "true" : "false", (unsigned long long)bytes,
                t_e2e * 1e3, t_d2h * 1e3, t_pp * 1e3, t_h2d * 1e3, sum * 1e3, t_e2e / sum, t_copy * 1e3, t_sum * 1e3,
                gbps(t_e2e), gbps(t_d2h), gbps(t_pp), gbps(t_h2d), gbps(t_copy), gbps(t_sum));
    std::fflush(stdout);
    cudaFree(data);
    cudaFreeHost(pinned);
  }
  return 0;
}

// Times the encoder's gradients all in flight at once (as a training step has them), and its small ones
// (up to 12 KB) alone: what a step's many small tensors cost beside its bytes.
int BenchEncoderSet(Worker& w) {
  const std::vector<uint64_t> all = EncoderGradientCounts();
  std::vector<uint64_t> small;
  for (uint64_t n : all) {
    if (n * sizeof(float) <= 12288) small.push_back(n);
  }
  const std::pair<std::string, std::vector<uint64_t>> sets[] = {{"encoder", all}, {"small", small}};
  for (const auto& [set, counts] : sets) {
    std::vector<void*> data(counts.size());
    uint64_t bytes = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      cudaMalloc(&data[i], counts[i] * sizeof(float));
      LaunchFill(DataType::kFloat32, data[i], counts[i], w.rank, w.stream);
      bytes += counts[i] * sizeof(float);
    }
    Status failed;
    auto run = [&] {
      Status s = RunAll(w, "bench/" + set + "/", counts, data);
      if (!s.ok()) failed = s;
    };
    run();  // warm up: declarations, shared memory
    const double t = Median(7, run);
    if (!failed.ok()) return Fail(set, failed);
    std::printf("{\"rank\": %d, \"set\": \"%s\", \"tensors\": %zu, \"bytes\": %llu, \"ms\": %.3f, "
                "\"gb_s\": %.2f, \"us_per_tensor\": %.1f}\n",
                w.rank, set.c_str(), counts.size(), (unsigned long long)bytes, t * 1e3, bytes / t / 1e9,
                t * 1e6 / counts.size());
    std::fflush(stdout);
    for (void* d : data) cudaFree(d);
  }
  return 0;
}

int RunWorker(const std::string& mode) {
  Status s = InitProcessEngine();
  if (!s.ok()) return Fail("init", s);
  Worker w;
  w.engine = ProcessEngine();
  w.rank = w.engine->rank();
  w.size = w.engine->size();
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  if (gpus == 0) return Fail("devices", Internal("no GPU"));
  // One process per GPU when the machine runs several (BYTEPS_LOCAL_SIZE), else one GPU per machine.
  const Config& config = w.engine->config();
  w.device = (config.local_size > 1 ? config.local_rank : config.worker_id) % gpus;
  cudaSetDevice(w.device);
  cudaStreamCreate(&w.stream);
  GpuPushPullOptions options = DefaultGpuOptions(*w.engine);
  const char* local_mode = std::getenv("BPS_GPU_MODE");
  if (local_mode && std::strcmp(local_mode, "root") == 0) options.mode = LocalReduceMode::kReduceToRoot;
  auto group = CreateGpuGroup(w.engine.get(), {w.device}, options);
  if (!group.ok()) return Fail("GPU group", group.status());
  w.group = std::move(group.value());
  w.push_pull = w.group->push_pull.get();
  int rc = mode == "bench" ? Bench(w) : mode == "bench_encoder" ? BenchEncoderSet(w) : Check(w);
  // Through the process's cached GPU groups (ProcessGpuPushPull), as the TF kernels go; with one GPU, one
  // member per process.
  const bool rendezvous = mode == "check" && config.local_size == 1;
  if (rc == 0 && rendezvous) rc = CheckRendezvous(w, gpus);
  w.group.reset();
  w.engine.reset();
  s = ShutdownProcessEngine();
  if (!s.ok() && rc == 0) return Fail("shutdown", s);
  if (rc == 0 && rendezvous) {
    // A second generation in this process: the GPU groups cached for the first engine were dropped at
    // shutdown, and are built anew for the new one.
    s = InitProcessEngine();
    if (!s.ok()) return Fail("init after shutdown", s);
    w.engine = ProcessEngine();
    rc = CheckRendezvous(w, gpus);
    w.engine.reset();
    s = ShutdownProcessEngine();
    if (!s.ok() && rc == 0) return Fail("second shutdown", s);
    if (rc == 0) std::printf("rank %d: a second generation after shutdown is exact\n", w.rank);
  }
  return rc;
}

}  // namespace
}  // namespace cuda
}  // namespace bps

int main(int argc, char** argv) {
  const char* role = std::getenv("DMLC_ROLE");
  if (role == nullptr || std::strcmp(role, "worker") != 0) {
    bps::Status s = bps::RunServiceRole();
    if (!s.ok()) std::fprintf(stderr, "gpu_job: %s\n", s.ToString().c_str());
    return s.ok() ? 0 : 1;
  }
  return bps::cuda::RunWorker(argc > 1 ? argv[1] : "check");
}

// GPU tests, run on a machine with GPUs (scripts/gpu_check.sh): local NCCL collectives and the GPU
// push_pull pipeline on 1 and 2 GPUs, every dtype, odd sizes, exact against a host reference. The
// distributed cases run two workers as threads of this process with a server and scheduler (in-memory
// transport), so the whole chunked D2H -> push -> pull -> H2D path runs, direct and staged.
#include <gtest/gtest.h>

#include <cstring>
#include <future>

#include "cc/common/clock.h"
#include "cc/common/shared_arena.h"
#include "cc/cuda/cuda_status.h"
#include "cc/cuda/gpu_data_mover.h"
#include "cc/cuda/gpu_push_pull.h"
#include "cc/cuda/host_registry.h"
#include "cc/cuda/local_nccl.h"
#include "cc/cuda/process_gpu.h"
#include "cc/cuda/test_kernels.h"
#include "cc/reducer/test_data.h"
#include "cc/runtime/local_job_testing.h"

namespace bps {
namespace cuda {
namespace {

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

int GpuCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<int> FirstGpus(int n) {
  std::vector<int> devices;
  for (int i = 0; i < n; ++i) devices.push_back(i);
  return devices;
}

// Device buffers holding, on member m, test_data for rank `rank_base + m`.
class DeviceData {
 public:
  DeviceData(const std::vector<int>& devices, DataType dtype, uint64_t count, int rank_base)
      : devices_(devices), dtype_(dtype), count_(count) {
    for (size_t m = 0; m < devices.size(); ++m) {
      cudaSetDevice(devices[m]);
      void* data = nullptr;
      cudaMalloc(&data, std::max<size_t>(1, count * DataTypeSize(dtype)));
      auto host = test_data::Fill(dtype, rank_base + static_cast<int>(m), count);
      cudaMemcpy(data, host.data(), host.size(), cudaMemcpyHostToDevice);
      cudaStream_t stream;
      cudaStreamCreate(&stream);
      data_.push_back(data);
      streams_.push_back(stream);
    }
  }
  ~DeviceData() {
    for (size_t m = 0; m < devices_.size(); ++m) {
      cudaSetDevice(devices_[m]);
      cudaFree(data_[m]);
      cudaStreamDestroy(streams_[m]);
    }
  }
  std::vector<GpuTensor> tensors() const {
    std::vector<GpuTensor> t;
    for (size_t m = 0; m < devices_.size(); ++m) t.push_back({devices_[m], data_[m], streams_[m]});
    return t;
  }
  std::vector<DeviceSpan> spans() const {
    std::vector<DeviceSpan> s;
    for (size_t m = 0; m < devices_.size(); ++m) s.push_back({devices_[m], data_[m], streams_[m]});
    return s;
  }
  // Waits on each member's stream, then checks it holds the sum over `ranks`.
  void ExpectSum(int ranks, const std::string& what) const {
    for (size_t m = 0; m < devices_.size(); ++m) {
      cudaSetDevice(devices_[m]);
      ASSERT_EQ(cudaStreamSynchronize(streams_[m]), cudaSuccess);
      std::vector<char> host(count_ * DataTypeSize(dtype_));
      ASSERT_EQ(cudaMemcpy(host.data(), data_[m], host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      uint64_t bad = test_data::FirstMismatch(dtype_, host, ranks, count_);
      ASSERT_EQ(bad, count_) << what << " member " << m << " first wrong element " << bad;
    }
  }

 private:
  std::vector<int> devices_;
  DataType dtype_;
  uint64_t count_;
  std::vector<void*> data_;
  std::vector<cudaStream_t> streams_;
};

const std::vector<uint64_t> kSizes = {1, 7, 1023, 1024, 1025, 1000003};

class LocalNcclTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (GpuCount() < GetParam()) GTEST_SKIP() << "needs " << GetParam() << " GPUs";
    auto nccl = LocalNccl::ForDevices(FirstGpus(GetParam()));
    ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
    nccl_ = std::move(nccl.value());
  }
  std::unique_ptr<LocalNccl> nccl_;
};

TEST_P(LocalNcclTest, ReduceThenBroadcastGivesEveryGpuTheSum) {
  for (DataType dtype : test_data::kAllTypes) {
    for (uint64_t n : kSizes) {
      DeviceData data(nccl_->devices(), dtype, n, 0);
      ASSERT_TRUE(nccl_->Reduce(data.spans(), dtype, n, 0).ok());
      ASSERT_TRUE(nccl_->Broadcast(data.spans(), dtype, n, 0).ok());
      data.ExpectSum(nccl_->size(), std::string(DataTypeName(dtype)) + "/" + std::to_string(n));
    }
  }
}

TEST_P(LocalNcclTest, ReduceScatterThenAllGatherGivesEveryGpuTheSum) {
  for (DataType dtype : test_data::kAllTypes) {
    for (uint64_t n : {uint64_t(2), uint64_t(1024), uint64_t(1000002)}) {
      DeviceData data(nccl_->devices(), dtype, n, 0);
      ASSERT_TRUE(nccl_->ReduceScatter(data.spans(), dtype, n).ok());
      ASSERT_TRUE(nccl_->AllGather(data.spans(), dtype, n).ok());
      data.ExpectSum(nccl_->size(), std::string(DataTypeName(dtype)) + "/" + std::to_string(n));
    }
  }
}

TEST_P(LocalNcclTest, LocalOnlyPushPullIsALocalAllReduce) {
  GpuPushPullOptions options;
  options.distributed = false;
  GpuPushPull push_pull(nullptr, nccl_.get(), nullptr, options);
  ASSERT_TRUE(push_pull.Init().ok());
  for (DataType dtype : test_data::kAllTypes) {
    for (uint64_t n : {uint64_t(0), uint64_t(7), uint64_t(1000003)}) {
      DeviceData data(nccl_->devices(), dtype, n, 0);
      std::promise<Status> done;
      push_pull.Run("t", dtype, n, 0, data.tensors(), [&](const Status& s) { done.set_value(s); });
      ASSERT_TRUE(done.get_future().get().ok());
      if (n > 0) data.ExpectSum(nccl_->size(), DataTypeName(dtype));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gpus, LocalNcclTest, ::testing::Values(1, 2, 4, 8));

// The mover of a GPU push_pull copies straight between a GPU and a block of a server's shared arena (mapped
// here as a worker maps it), registering the block's pages on first sight, and between a GPU and the pinned
// staging; a piece of the tensor is copied on its own; a copy is cut where two registrations meet.
TEST(GpuDataMoverTest, CopiesBetweenTheGpuAndAnArenaBlockOrTheStaging) {
  if (GpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  const uint64_t n = 1000003;
  const size_t bytes = n * sizeof(float);
  auto arena = SharedArena::Create(size_t(1) << 34);  // a huge reservation, as a server's
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  auto block = arena.value()->Allocate(bytes);
  ASSERT_TRUE(block);
  auto view = SharedArenaView::Open(arena.value()->locator());
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  char* host = view.value()->At(block->offset, bytes);
  ASSERT_NE(host, nullptr);
  ASSERT_CUDA(cudaSetDevice(0));
  std::vector<float> values(n);
  for (uint64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 4099);
  void* device = nullptr;
  ASSERT_CUDA(cudaMalloc(&device, bytes));
  ASSERT_CUDA(cudaMemcpy(device, values.data(), bytes, cudaMemcpyHostToDevice));
  char* staging = nullptr;
  ASSERT_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&staging), bytes, cudaHostAllocDefault));
  GpuDataMover mover(std::make_shared<CopyStreams>(), staging, sizeof(float),
                     {DeviceRun{0, static_cast<char*>(device), 0, n}}, /*timeout_s=*/60);

  // A page in the middle registered first (as by a neighbouring block's copy): the block's copy spans three
  // registrations, which CUDA takes only one at a time.
  ASSERT_TRUE(HostRegistry::OfProcess().Register(host + bytes / 2, 8));
  ASSERT_TRUE(mover.ToHost(staging, host, bytes).ok());
  EXPECT_EQ(std::memcmp(block->data, values.data(), bytes), 0) << "the server sees the GPU's bytes";
  cudaPointerAttributes attributes;
  ASSERT_CUDA(cudaPointerGetAttributes(&attributes, host));
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "the block is registered with CUDA";

  std::vector<float> doubled(n);
  for (uint64_t i = 0; i < n; ++i) doubled[i] = 2 * values[i];
  std::memcpy(block->data, doubled.data(), bytes);  // the server's sum
  ASSERT_TRUE(mover.FromHost(staging, host, bytes).ok());
  std::vector<float> back(n);
  ASSERT_CUDA(cudaMemcpy(back.data(), device, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, doubled);

  // A piece (as a partition of a chunk) into the staging itself, for the transport.
  const uint64_t first = 1000, count = 5000;
  std::memset(staging, 0, bytes);
  char* piece = staging + first * sizeof(float);
  ASSERT_TRUE(mover.ToHost(piece, piece, count * sizeof(float)).ok());
  EXPECT_EQ(std::memcmp(piece, doubled.data() + first, count * sizeof(float)), 0);
  EXPECT_EQ(reinterpret_cast<float*>(staging)[first - 1], 0.0f) << "nothing outside the piece";
  char* last = staging + (n - 1) * sizeof(float);
  EXPECT_FALSE(mover.ToHost(last, last, 2 * sizeof(float)).ok()) << "bytes beyond the tensor's runs are refused";

  view.value().reset();  // unregisters the block (the unmap hook) before the mapping goes
  cudaFreeHost(staging);
  cudaFree(device);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// A copy the GPU does not finish within the timeout fails with DeadlineExceeded instead of blocking (the
// engine's thread, and shutdown, would wait for it), and so does one started behind it before the wait;
// their stream, still busy, is not used again, also when the second copy had taken it meanwhile.
TEST(GpuDataMoverTest, ACopyThatDoesNotFinishInTimeFails) {
  if (GpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  ASSERT_CUDA(cudaSetDevice(0));
  const size_t bytes = 1 << 20;
  void* device = nullptr;
  ASSERT_CUDA(cudaMalloc(&device, bytes));
  char* staging = nullptr;
  ASSERT_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&staging), bytes, cudaHostAllocDefault));
  int* release = nullptr;
  ASSERT_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&release), sizeof(int), cudaHostAllocMapped));
  *release = 0;
  // However the test ends (a failed ASSERT returns early), the spinning kernel ends before the flag goes.
  struct Release {
    int* flag;
    ~Release() {
      *static_cast<volatile int*>(flag) = 1;
      cudaDeviceSynchronize();
      cudaFreeHost(flag);
    }
  } release_at_end{release};
  int* release_on_gpu = nullptr;
  ASSERT_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&release_on_gpu), release, 0));

  auto streams = std::make_shared<CopyStreams>();
  // The stream the mover's copies to the host will get, held by a kernel that spins.
  auto held = streams->Take(0, /*to_host=*/true);
  ASSERT_TRUE(held.ok());
  ASSERT_CUDA(LaunchSpinUntilReleased(release_on_gpu, held.value()));
  streams->Give(0, /*to_host=*/true, held.value());
  GpuDataMover mover(streams, staging, sizeof(float), {DeviceRun{0, static_cast<char*>(device), 0, bytes / 4}},
                     /*timeout_s=*/0.5);
  const double start = NowSeconds();
  DataMover::InFlight first = mover.StartToHost(staging, staging, bytes / 2);
  DataMover::InFlight second = mover.StartToHost(staging + bytes / 2, staging + bytes / 2, bytes / 2);
  auto taken = streams->Take(0, /*to_host=*/true);  // the two copies' stream, out of the pool during the wait
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken.value(), held.value()) << "the second copy queued behind the first on its stream";
  Status copied = first();
  const double waited = NowSeconds() - start;
  EXPECT_EQ(copied.code(), Code::kDeadlineExceeded) << copied.ToString();
  EXPECT_NE(copied.message().find("BYTEPS_TIMEOUT"), std::string::npos) << copied.message();
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(second().code(), Code::kDeadlineExceeded);
  streams->Give(0, /*to_host=*/true, taken.value());

  auto next = streams->Take(0, /*to_host=*/true);
  ASSERT_TRUE(next.ok());
  EXPECT_NE(next.value(), held.value()) << "the stream that timed out is not handed out again";
  streams->Give(0, /*to_host=*/true, next.value());
  std::memset(staging, 0, bytes);
  ASSERT_CUDA(cudaMemset(device, 7, bytes));
  ASSERT_CUDA(cudaStreamSynchronize(nullptr));  // (the mover's streams do not wait for the default stream)
  EXPECT_TRUE(mover.ToHost(staging, staging, bytes).ok()) << "later copies use another stream";
  EXPECT_EQ(static_cast<unsigned char>(staging[bytes - 1]), 7);

  *static_cast<volatile int*>(release) = 1;  // the spinning kernel ends (before the frees, which wait for it)
  ASSERT_CUDA(cudaDeviceSynchronize());
  cudaFreeHost(staging);
  cudaFree(device);
}

// Two workers (threads with their own engines) each driving `gpus` GPUs, through a real server on this host:
// each tensor three times (its first round through the transport, later ones through the server's shared
// memory), with direct copies (the mover) and through the pinned staging.
class DistributedTest : public ::testing::TestWithParam<std::tuple<int, LocalReduceMode, bool>> {};

TEST_P(DistributedTest, EveryGpuOfEveryWorkerGetsTheGlobalSum) {
  const int gpus = std::get<0>(GetParam());
  if (GpuCount() < gpus) GTEST_SKIP() << "needs " << gpus << " GPUs";
  testing::LocalJob job(2, 2, /*timeout_s=*/60);
  std::vector<std::unique_ptr<LocalNccl>> nccls;
  std::vector<std::unique_ptr<GpuPushPull>> workers;
  for (int w = 0; w < 2; ++w) {
    auto nccl = LocalNccl::ForDevices(FirstGpus(gpus));
    ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
    nccls.push_back(std::move(nccl.value()));
    GpuPushPullOptions options;
    options.chunk_bytes = 4096 * 3;  // several chunks, crossing GPU slice boundaries
    options.mode = std::get<1>(GetParam());
    options.direct_copies = std::get<2>(GetParam());
    options.direct_copies_from_bytes = 0;  // every size through the mover when direct
    workers.push_back(std::make_unique<GpuPushPull>(&job.worker(w), nccls.back().get(), nullptr, options));
    ASSERT_TRUE(workers.back()->Init().ok());
  }
  for (DataType dtype : test_data::kAllTypes) {
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(3071), uint64_t(3072), uint64_t(100003),
                       uint64_t(600001)}) {  // (above 8 GPUs x 256 KiB of floats: reduce-scattered)
      for (int round = 0; round < 3; ++round) {
        std::string name = std::string(DataTypeName(dtype)) + "/" + std::to_string(n);
        std::vector<std::unique_ptr<DeviceData>> data;
        std::vector<std::promise<Status>> done(2);
        for (int w = 0; w < 2; ++w) {
          data.push_back(std::make_unique<DeviceData>(nccls[w]->devices(), dtype, n, w * gpus));
          workers[w]->Run(name, dtype, n, 0, data[w]->tensors(), [&done, w](const Status& s) { done[w].set_value(s); });
        }
        for (int w = 0; w < 2; ++w) {
          auto future = done[w].get_future();
          ASSERT_EQ(future.wait_for(std::chrono::seconds(60)), std::future_status::ready) << name;
          Status s = future.get();
          ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
          if (n > 0) data[w]->ExpectSum(2 * gpus, name + " round " + std::to_string(round));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GpusAndModes, DistributedTest,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8),
                                            ::testing::Values(LocalReduceMode::kReduceToRoot,
                                                              LocalReduceMode::kReduceScatter),
                                            ::testing::Bool()));

// One process per GPU (Horovod-style), played by threads with their own engines: `machines` worker machines
// of one process per GPU of this host each, process l of every machine on GPU l. Each machine's processes share one NCCL
// communicator set up through the LocalCoordinator, and each pushes only its own part of the sum.
class ProcessPerGpuTest : public ::testing::TestWithParam<std::tuple<int, LocalReduceMode>> {};

TEST_P(ProcessPerGpuTest, EveryProcessGetsTheGlobalSum) {
  const int machines = std::get<0>(GetParam()), local_size = GpuCount();
  if (local_size < 2) GTEST_SKIP() << "needs 2 GPUs";
  const int processes = machines * local_size;
  testing::LocalJob job(machines, 2, /*timeout_s=*/60, /*credit_bytes=*/4 * 4096, local_size);
  std::vector<std::unique_ptr<GpuGroup>> groups(processes);
  std::vector<std::thread> joining;
  for (int r = 0; r < processes; ++r) {
    joining.emplace_back([&, r] {  // every local process must join for any of them to finish
      GpuPushPullOptions options = DefaultGpuOptions(job.worker(r));
      options.chunk_bytes = 4096 * 3;
      options.mode = std::get<1>(GetParam());
      auto group = CreateGpuGroup(&job.worker(r), {r % local_size}, options);
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      groups[r] = std::move(group.value());
    });
  }
  for (auto& t : joining) t.join();
  for (auto& g : groups) ASSERT_NE(g, nullptr);
  EXPECT_EQ(groups[0]->push_pull->options().distributed, machines > 1);
  for (DataType dtype : test_data::kAllTypes) {
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(3071), uint64_t(3072), uint64_t(100003),
                       uint64_t(600001)}) {  // (above 8 GPUs x 256 KiB of floats: reduce-scattered)
      std::string name = std::string(DataTypeName(dtype)) + "/" + std::to_string(n);
      std::vector<std::unique_ptr<DeviceData>> data;
      std::vector<std::promise<Status>> done(processes);
      for (int r = 0; r < processes; ++r) data.push_back(std::make_unique<DeviceData>(std::vector<int>{r % local_size}, dtype, n, r));
      for (int r = processes - 1; r >= 0; --r) {  // the processes of a machine arrive in different orders
        groups[r]->push_pull->Run(name, dtype, n, 0, data[r]->tensors(),
                                  [&done, r](const Status& s) { done[r].set_value(s); });
      }
      for (int r = 0; r < processes; ++r) {
        auto future = done[r].get_future();
        ASSERT_EQ(future.wait_for(std::chrono::seconds(60)), std::future_status::ready) << name;
        Status s = future.get();
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        if (n > 0) data[r]->ExpectSum(processes, name);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MachinesAndModes, ProcessPerGpuTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(LocalReduceMode::kReduceToRoot,
                                                              LocalReduceMode::kReduceScatter)));

}  // namespace
}  // namespace cuda
}  // namespace bps

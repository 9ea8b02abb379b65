// Multi-rank tests of the whole worker/server/scheduler protocol: every node is a thread in this
// process, connected by the in-memory transport.
#include "cc/runtime/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "cc/common/clock.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/reducer/half.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

Config NodeConfig(Role role, int num_workers, int num_servers, int worker_id, double timeout_s,
                  size_t credit_bytes = 4 * 4096) {
  Config c;
  c.role = role;
  c.root_uri = "scheduler";
  c.root_port = 1;
  c.node_host = role == Role::kScheduler ? "scheduler" : "node";
  c.num_worker = num_workers;
  c.num_server = num_servers;
  c.worker_id = worker_id;
  c.partition_bytes = 4096;
  c.scheduling_credit = credit_bytes;
  c.timeout_s = timeout_s;
  return c;
}

// A job of `workers` engines and `servers` servers plus a scheduler, all threads of this process.
class LocalJob {
 public:
  LocalJob(int workers, int servers, double timeout_s = 20, size_t credit_bytes = 4 * 4096)
      : network_(std::make_shared<InMemoryNetwork>()) {
    scheduler_transport_ = CreateInMemoryTransport(network_);
    scheduler_ = std::make_unique<Scheduler>(NodeConfig(Role::kScheduler, workers, servers, 0, timeout_s),
                                             scheduler_transport_.get());
    scheduler_thread_ = std::thread([this] { scheduler_result_ = scheduler_->Run(); });
    for (int s = 0; s < servers; ++s) {
      server_transports_.push_back(CreateInMemoryTransport(network_));
      servers_.push_back(std::make_unique<Server>(NodeConfig(Role::kServer, workers, servers, 0, timeout_s),
                                                  server_transports_.back().get()));
    }
    for (int s = 0; s < servers; ++s) {
      server_threads_.emplace_back([this, s] { servers_[s]->Run(); });
    }
    std::vector<std::future<StatusOr<std::unique_ptr<Engine>>>> starting;
    for (int w = 0; w < workers; ++w) {
      starting.push_back(std::async(std::launch::async, [this, w, workers, servers, timeout_s, credit_bytes] {
        return Engine::Start(NodeConfig(Role::kWorker, workers, servers, w, timeout_s, credit_bytes),
                             CreateInMemoryTransport(network_));
      }));
    }
    for (auto& f : starting) {
      auto engine = f.get();
      if (!engine.ok()) {
        ADD_FAILURE() << engine.status().ToString();
        std::abort();  // a job that did not start cannot be torn down in order
      }
      engines_.push_back(std::move(engine.value()));
    }
  }

  ~LocalJob() {
    std::vector<std::thread> stopping;
    for (auto& e : engines_) {
      if (e) stopping.emplace_back([&e] { e->Shutdown(); });
    }
    for (auto& t : stopping) t.join();
    scheduler_thread_.join();
    for (auto& t : server_threads_) t.join();
    for (auto& t : server_transports_) t->Shutdown(1);
    scheduler_transport_->Shutdown(1);
  }

  Engine& worker(int i) { return *engines_[i]; }
  int workers() const { return static_cast<int>(engines_.size()); }
  void KillServer(int s) {
    server_transports_[s]->Shutdown(0);
    servers_[s]->Stop(Aborted("killed by the test"));
  }

 private:
  std::shared_ptr<InMemoryNetwork> network_;
  std::unique_ptr<Transport> scheduler_transport_;
  std::unique_ptr<Scheduler> scheduler_;
  Status scheduler_result_;
  std::thread scheduler_thread_;
  std::vector<std::unique_ptr<Transport>> server_transports_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::thread> server_threads_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

std::future<Status> PushPull(Engine& engine, const std::string& name, DataType dtype, std::vector<int64_t> shape,
                             const void* in, void* out, int priority = 0) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.input = in;
  r.output = out;
  r.priority = priority;
  r.done = [done](const Status& s) { done->set_value(s); };
  engine.Enqueue(std::move(r));
  return result;
}

Status Await(std::future<Status>& f, double seconds = 30) {
  if (f.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    return DeadlineExceeded("test gave up waiting");
  }
  return f.get();
}

// Worker w's value i, exactly representable in every dtype (small integers).
double Value(int w, uint64_t i) { return static_cast<double>(((i * 7 + w * 3) % 17)) - 8; }

void Fill(DataType dtype, int w, uint64_t n, std::vector<char>* bytes) {
  bytes->resize(n * DataTypeSize(dtype));
  for (uint64_t i = 0; i < n; ++i) {
    double v = Value(w, i);
    char* p = bytes->data() + i * DataTypeSize(dtype);
    switch (dtype) {
      case DataType::kFloat16: { uint16_t h = FloatToHalf(float(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t h = FloatToBFloat16(float(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kFloat32: { float f = float(v); std::memcpy(p, &f, 4); break; }
      case DataType::kFloat64: std::memcpy(p, &v, 8); break;
      case DataType::kInt32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
      case DataType::kInt64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
    }
  }
}

double Read(DataType dtype, const std::vector<char>& bytes, uint64_t i) {
  const char* p = bytes.data() + i * DataTypeSize(dtype);
  switch (dtype) {
    case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h); }
    case DataType::kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); return BFloat16ToFloat(h); }
    case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case DataType::kFloat64: { double d; std::memcpy(&d, p, 8); return d; }
    case DataType::kInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DataType::kInt64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
  }
  return 0;
}

class SumTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SumTest, EveryDtypeAndSizeMatchesTheReference) {
  const int workers = std::get<0>(GetParam());
  const int servers = std::get<1>(GetParam());
  LocalJob job(workers, servers);
  // 4096-byte partitions: for float32 1024 elements is exactly one partition.
  const std::vector<uint64_t> sizes = {0, 1, 7, 1023, 1024, 1025, 100000};
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
                         DataType::kInt32, DataType::kInt64}) {
    for (uint64_t n : sizes) {
      std::string name = std::string(DataTypeName(dtype)) + "/" + std::to_string(n);
      std::vector<std::vector<char>> in(workers), out(workers);
      std::vector<std::future<Status>> done;
      for (int w = 0; w < workers; ++w) {
        Fill(dtype, w, n, &in[w]);
        out[w].assign(in[w].size(), 0);
        done.push_back(PushPull(job.worker(w), name, dtype, {int64_t(n)}, in[w].data(), out[w].data()));
      }
      for (int w = 0; w < workers; ++w) {
        Status s = Await(done[w]);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        for (uint64_t i = 0; i < n; ++i) {
          double expected = 0;
          for (int v = 0; v < workers; ++v) expected += Value(v, i);
          ASSERT_EQ(Read(dtype, out[w], i), expected) << name << " element " << i << " worker " << w;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersAndServers, SumTest,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(1, 2)));

TEST(EngineTest, HundredsInFlightAndInPlace) {
  LocalJob job(2, 2);
  const int kTensors = 200;
  std::vector<std::vector<float>> data[2];
  std::vector<std::future<Status>> done[2];
  for (int w = 0; w < 2; ++w) {
    for (int t = 0; t < kTensors; ++t) data[w].push_back(std::vector<float>(1 + t * 13, float(w + t)));
    for (int t = 0; t < kTensors; ++t) {
      auto& v = data[w][t];
      // Each worker enqueues in a different order: keys come from names, not order.
      int idx = w == 0 ? t : kTensors - 1 - t;
      auto& u = data[w][idx];
      done[w].push_back(PushPull(job.worker(w), "t" + std::to_string(idx), DataType::kFloat32,
                                 {int64_t(u.size())}, u.data(), u.data(), idx % 5));
      (void)v;
    }
  }
  for (int w = 0; w < 2; ++w) {
    for (auto& f : done[w]) ASSERT_TRUE(Await(f).ok());
    for (int t = 0; t < kTensors; ++t) {
      for (float x : data[w][t]) ASSERT_EQ(x, float(2 * t + 1));
    }
  }
}

// With a window of one partition, each worker's first tensor takes the whole window. If credit were held
// until the pull (which waits for the other worker), opposite enqueue orders would deadlock.
TEST(EngineTest, OppositeOrdersUnderATinyCreditWindowDoNotDeadlock) {
  LocalJob job(2, 1, /*timeout_s=*/10, /*credit_bytes=*/4096);
  const int kTensors = 20;
  std::vector<std::vector<float>> data[2];
  std::vector<std::future<Status>> done[2];
  for (int w = 0; w < 2; ++w) {
    for (int t = 0; t < kTensors; ++t) data[w].push_back(std::vector<float>(3000, float(t)));
  }
  for (int w = 0; w < 2; ++w) {
    for (int i = 0; i < kTensors; ++i) {
      int t = w == 0 ? i : kTensors - 1 - i;
      done[w].push_back(PushPull(job.worker(w), "t" + std::to_string(t), DataType::kFloat32, {3000},
                                 data[w][t].data(), data[w][t].data()));
    }
  }
  for (int w = 0; w < 2; ++w) {
    for (auto& f : done[w]) ASSERT_TRUE(Await(f).ok());
    for (int t = 0; t < kTensors; ++t) ASSERT_EQ(data[w][t][2999], float(2 * t));
  }
}

TEST(EngineTest, HundredRoundsOfTheSameTensor) {
  LocalJob job(3, 2);
  const int n = 5000;
  for (int round = 0; round < 100; ++round) {
    std::vector<std::vector<int64_t>> in(3, std::vector<int64_t>(n)), out(3, std::vector<int64_t>(n));
    std::vector<std::future<Status>> done;
    for (int w = 0; w < 3; ++w) {
      for (int i = 0; i < n; ++i) in[w][i] = round * 1000 + w * 10 + i;
      done.push_back(PushPull(job.worker(w), "grad", DataType::kInt64, {n}, in[w].data(), out[w].data()));
    }
    for (int w = 0; w < 3; ++w) {
      ASSERT_TRUE(Await(done[w]).ok());
      for (int i = 0; i < n; i += 97) ASSERT_EQ(out[w][i], 3 * (round * 1000 + i) + 30);
    }
  }
}

TEST(EngineTest, MismatchedShapesFailOnEveryWorker) {
  LocalJob job(2, 1);
  std::vector<float> a(12), b(13), out_a(12), out_b(13);
  auto fa = PushPull(job.worker(0), "w", DataType::kFloat32, {3, 4}, a.data(), out_a.data());
  auto fb = PushPull(job.worker(1), "w", DataType::kFloat32, {13}, b.data(), out_b.data());
  Status sa = Await(fa), sb = Await(fb);
  for (const Status& s : {sa, sb}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("'w'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("float32[3,4]"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("float32[13]"), std::string::npos) << s.message();
  }
  // Other tensors still work.
  std::vector<float> x(5, 1.0f), y(5, 2.0f);
  auto fx = PushPull(job.worker(0), "ok", DataType::kFloat32, {5}, x.data(), x.data());
  auto fy = PushPull(job.worker(1), "ok", DataType::kFloat32, {5}, y.data(), y.data());
  ASSERT_TRUE(Await(fx).ok());
  ASSERT_TRUE(Await(fy).ok());
  EXPECT_EQ(x[4], 3.0f);
}

TEST(EngineTest, MismatchedDtypesFailOnEveryWorker) {
  LocalJob job(2, 1);
  std::vector<float> a(4);
  std::vector<double> b(4);
  auto fa = PushPull(job.worker(0), "d", DataType::kFloat32, {4}, a.data(), a.data());
  auto fb = PushPull(job.worker(1), "d", DataType::kFloat64, {4}, b.data(), b.data());
  EXPECT_EQ(Await(fa).code(), Code::kInvalidArgument);
  EXPECT_EQ(Await(fb).code(), Code::kInvalidArgument);
}

TEST(EngineTest, OneNameForTwoTensorsIsRejectedLocally) {
  LocalJob job(1, 1);
  std::vector<float> a(4), b(5);
  auto fa = PushPull(job.worker(0), "same", DataType::kFloat32, {4}, a.data(), a.data());
  ASSERT_TRUE(Await(fa).ok());
  auto fb = PushPull(job.worker(0), "same", DataType::kFloat32, {5}, b.data(), b.data());
  Status s = Await(fb);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("two different tensors"), std::string::npos) << s.message();
}

TEST(EngineTest, AWorkerThatNeverPushesTimesOutTheOthers) {
  LocalJob job(2, 1, /*timeout_s=*/1.5);
  std::vector<float> a(10);
  double start = NowSeconds();
  auto fa = PushPull(job.worker(0), "lonely", DataType::kFloat32, {10}, a.data(), a.data());
  Status s = Await(fa, 20);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("lonely"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("worker(s) 1"), std::string::npos) << s.message();
  EXPECT_LT(NowSeconds() - start, 5.0);
}

TEST(EngineTest, AWorkerThatStopsMidwayTimesOutAtTheServer) {
  LocalJob job(2, 1, /*timeout_s=*/1.5);
  std::vector<float> a(10), b(10);
  auto f0 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a.data(), a.data());
  auto f1 = PushPull(job.worker(1), "t", DataType::kFloat32, {10}, b.data(), b.data());
  ASSERT_TRUE(Await(f0).ok());
  ASSERT_TRUE(Await(f1).ok());
  auto again = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a.data(), a.data());
  Status s = Await(again, 20);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
}

TEST(EngineTest, LosingAServerFailsEveryWorkerPromptly) {
  LocalJob job(2, 2, /*timeout_s=*/30);
  std::vector<float> a(100000), b(100000);
  auto f0 = PushPull(job.worker(0), "before", DataType::kFloat32, {100000}, a.data(), a.data());
  auto f1 = PushPull(job.worker(1), "before", DataType::kFloat32, {100000}, b.data(), b.data());
  ASSERT_TRUE(Await(f0).ok());
  ASSERT_TRUE(Await(f1).ok());
  job.KillServer(1);
  double start = NowSeconds();
  for (int w = 0; w < 2; ++w) {
    auto f = PushPull(job.worker(w), "after", DataType::kFloat32, {100000}, a.data(), a.data());
    Status s = Await(f, 20);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("lost server"), std::string::npos) << s.message();  // ranks follow registration order
  }
  EXPECT_LT(NowSeconds() - start, 10.0);
}

}  // namespace
}  // namespace bps

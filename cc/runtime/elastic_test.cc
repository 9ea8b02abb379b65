// An elastic job in one process, every node a thread over the in-memory transport: workers are lost and
// join while the others push_pull. Every round completes with exactly the workers of its generation (its sum
// is theirs, in every dtype) or fails with the membership's change; the others go on renumbered.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cc/common/clock.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/reducer/test_data.h"
#include "cc/runtime/engine.h"
#include "cc/runtime/engine_testing.h"
#include "cc/runtime/local_job_testing.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::NodeConfig;

constexpr DataType kDtypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                DataType::kFloat64, DataType::kInt32,   DataType::kInt64};

// One worker process: its transport, its place in the job (kept across generations) and this generation's
// engine.
struct Worker {
  int id = 0;
  Config config;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<WorkerClient> client;
  std::unique_ptr<Engine> engine;
};

class ElasticJob {
 public:
  ElasticJob(int first_workers, int servers, ElasticLimits limits, double elastic_timeout_s = 30)
      : network_(std::make_shared<InMemoryNetwork>()),
        first_workers_(first_workers),
        servers_count_(servers),
        limits_(limits),
        elastic_timeout_s_(elastic_timeout_s) {
    scheduler_transport_ = CreateInMemoryTransport(network_);
    scheduler_ = std::make_unique<Scheduler>(Configure(Role::kScheduler, 0), scheduler_transport_.get());
    scheduler_thread_ = std::thread([this] { scheduler_result_ = scheduler_->Run(); });
    for (int s = 0; s < servers; ++s) {
      server_transports_.push_back(CreateInMemoryTransport(network_));
      servers_.push_back(std::make_unique<Server>(Configure(Role::kServer, 0), server_transports_.back().get()));
    }
    for (int s = 0; s < servers; ++s) server_threads_.emplace_back([this, s] { servers_[s]->Run().IgnoreError(); });
  }

  ~ElasticJob() {
    std::vector<std::thread> leaving;  // together: each shutdown() waits for the others
    for (auto& entry : workers_) leaving.emplace_back([w = entry.second.get()] { Leave(w); });
    for (auto& t : leaving) t.join();
    scheduler_thread_.join();
    for (auto& t : server_threads_) t.join();
    for (auto& t : server_transports_) t->Shutdown(1);
    scheduler_transport_->Shutdown(1);
  }

  Config Configure(Role role, int worker_id) const {
    Config c = NodeConfig(role, first_workers_, servers_count_, worker_id, /*timeout_s=*/20);
    c.min_workers = limits_.min_workers;
    c.max_workers = limits_.max_workers;
    c.elastic_timeout_s = elastic_timeout_s_;
    return c;
  }

  // Starts worker `id` (a process that joins the job) in the background; the result says when it is in.
  std::future<Status> Start(int id) {
    auto worker = std::make_shared<Worker>();
    worker->id = id;
    worker->config = Configure(Role::kWorker, id);
    worker->transport = CreateInMemoryTransport(network_);
    worker->client = std::make_shared<WorkerClient>(worker->config, worker->transport.get());
    {
      std::lock_guard<std::mutex> lock(mu_);
      workers_[id] = worker;
    }
    return std::async(std::launch::async, [worker] {
      Status started = worker->client->Start();
      if (started.ok()) worker->engine = Engine::Start(worker->config, worker->client);
      return started;
    });
  }

  Worker& worker(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    return *workers_.at(id);
  }

  // The process of worker `id` dies: its connections close.
  void Kill(int id) {
    std::shared_ptr<Worker> worker;
    {
      std::lock_guard<std::mutex> lock(mu_);
      worker = workers_.at(id);
      workers_.erase(id);
    }
    // Its threads die with it: nothing it waited for will answer.
    worker->client->OnPeerLost(-1, Unavailable("this process was killed"));
    worker->transport->Shutdown(0);
    dead_.push_back(worker);  // its thread may still hold it
  }

  // Worker `id` ends this generation (shutdown()) and starts the next (init()), as bps_tf.elastic's reset does.
  static Status Next(Worker& w) {
    Status ended = w.engine->Shutdown();
    w.engine.reset();
    if (!ended.ok()) return ended;
    BPS_RETURN_IF_ERROR(w.client->NextGeneration());
    w.engine = Engine::Start(w.config, w.client);
    return Status::OK();
  }

 private:
  static void Leave(Worker* w) {
    if (w->engine) w->engine->Shutdown().IgnoreError();
    w->transport->Shutdown(1);
  }

  std::shared_ptr<InMemoryNetwork> network_;
  const int first_workers_, servers_count_;
  const ElasticLimits limits_;
  const double elastic_timeout_s_;
  std::unique_ptr<Transport> scheduler_transport_;
  std::unique_ptr<Scheduler> scheduler_;
  Status scheduler_result_;
  std::thread scheduler_thread_;
  std::vector<std::unique_ptr<Transport>> server_transports_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::thread> server_threads_;
  std::mutex mu_;
  std::map<int, std::shared_ptr<Worker>> workers_;
  std::vector<std::shared_ptr<Worker>> dead_;
};

std::future<Status> PushPull(Engine& engine, const std::string& name, DataType dtype, uint64_t n, const void* in,
                             void* out, ReduceOp op = ReduceOp::kSum) {
  return testing::Collective(engine, name, dtype, {static_cast<int64_t>(n)}, in, out, op);
}

Status Await(std::future<Status>& f, double seconds = 30) {
  if (f.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    return DeadlineExceeded("test gave up waiting");
  }
  return f.get();
}

// Every dtype push_pulled by worker `w` in its generation: the sum over the generation's ranks, exactly.
// Returns what was wrong, or "" when every sum was exact.
std::string CheckEveryDtype(Worker& w, uint64_t n, const std::string& tag) {
  Engine& engine = *w.engine;
  std::vector<std::vector<char>> in, out;
  std::vector<std::future<Status>> pending;
  for (DataType dtype : kDtypes) {
    in.push_back(test_data::Fill(dtype, engine.rank(), n));
    out.emplace_back(in.back().size());
  }
  for (size_t i = 0; i < in.size(); ++i) {
    pending.push_back(PushPull(engine, tag + DataTypeName(kDtypes[i]), kDtypes[i], n, in[i].data(), out[i].data()));
  }
  std::string wrong;
  for (size_t i = 0; i < in.size(); ++i) {
    Status s = Await(pending[i]);
    if (!s.ok()) {
      wrong += std::string(DataTypeName(kDtypes[i])) + ": " + s.ToString() + "; ";
      continue;
    }
    uint64_t at = test_data::FirstMismatch(kDtypes[i], out[i], engine.size(), n);
    if (at != n) wrong += std::string(DataTypeName(kDtypes[i])) + " wrong at " + std::to_string(at) + "; ";
  }
  return wrong;
}

TEST(ElasticEngineTest, WorkersLeaveAndJoinAndEverySumIsTheGenerationsInEveryDtype) {
  ElasticJob job(3, 2, ElasticLimits{1, 4});
  std::vector<std::future<Status>> starting;
  for (int id = 0; id < 3; ++id) starting.push_back(job.Start(id));
  for (auto& f : starting) ASSERT_TRUE(Await(f).ok());
  const uint64_t n = 3001;  // several partitions of 4096 bytes on two servers
  for (int id = 0; id < 3; ++id) {
    EXPECT_EQ(job.worker(id).engine->rank(), id);
    EXPECT_EQ(job.worker(id).engine->size(), 3);
  }
  {
    std::vector<std::future<std::string>> checks;
    for (int id = 0; id < 3; ++id) {
      checks.push_back(std::async(std::launch::async, [&job, id, n] { return CheckEveryDtype(job.worker(id), n, "a/"); }));
    }
    for (auto& c : checks) EXPECT_EQ(c.get(), "");
  }

  // Workers 0 and 1 push a round that worker 2 never will: it dies. Their round fails at once.
  std::vector<char> in0 = test_data::Fill(DataType::kFloat32, 0, n), out0(in0.size());
  std::vector<char> in1 = test_data::Fill(DataType::kFloat32, 1, n), out1(in1.size());
  auto p0 = PushPull(*job.worker(0).engine, "lost round", DataType::kFloat32, n, in0.data(), out0.data());
  auto p1 = PushPull(*job.worker(1).engine, "lost round", DataType::kFloat32, n, in1.data(), out1.data());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double killed_at = NowSeconds();
  job.Kill(2);
  for (auto* p : {&p0, &p1}) {
    Status s = Await(*p, 5);
    EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
    EXPECT_NE(s.message().find("the job's workers changed"), std::string::npos) << s.ToString();
  }
  EXPECT_LT(NowSeconds() - killed_at, 2) << "the survivors' pending collectives fail at once";
  EXPECT_FALSE(job.worker(0).client->generation_failure().ok());

  // The survivors go on as a job of two, renumbered.
  {
    auto next1 = std::async(std::launch::async, [&] { return ElasticJob::Next(job.worker(1)); });
    ASSERT_TRUE(ElasticJob::Next(job.worker(0)).ok());
    ASSERT_TRUE(next1.get().ok());
  }
  EXPECT_EQ(job.worker(1).engine->rank(), 1);
  EXPECT_EQ(job.worker(1).engine->size(), 2);
  {
    auto c1 = std::async(std::launch::async, [&] { return CheckEveryDtype(job.worker(1), n, "b/"); });
    EXPECT_EQ(CheckEveryDtype(job.worker(0), n, "b/"), "");
    EXPECT_EQ(c1.get(), "");
  }

  // Worker 2 comes back, then worker 3 is new: they wait until the others end their generation.
  auto waiting = [&job](int count) {
    Deadline told(10);
    while (job.worker(0).client->workers_waiting() < count && !told.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return job.worker(0).client->workers_waiting();
  };
  auto back = job.Start(2);
  EXPECT_EQ(waiting(1), 1) << "registered first, it ranks first of the newcomers";
  auto grown = job.Start(3);
  EXPECT_EQ(waiting(2), 2);
  EXPECT_EQ(back.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "not admitted yet";
  {
    auto next1 = std::async(std::launch::async, [&] { return ElasticJob::Next(job.worker(1)); });
    ASSERT_TRUE(ElasticJob::Next(job.worker(0)).ok());
    ASSERT_TRUE(next1.get().ok());
  }
  ASSERT_TRUE(Await(back).ok());
  ASSERT_TRUE(Await(grown).ok());
  EXPECT_EQ(job.worker(0).engine->size(), 4);
  EXPECT_EQ(job.worker(2).engine->rank(), 2) << "the newcomers rank after the workers that stayed";
  EXPECT_EQ(job.worker(3).engine->rank(), 3);
  {
    std::vector<std::future<std::string>> checks;
    for (int id = 0; id < 4; ++id) {
      checks.push_back(std::async(std::launch::async, [&job, id, n] { return CheckEveryDtype(job.worker(id), n, "c/"); }));
    }
    for (auto& c : checks) EXPECT_EQ(c.get(), "");
  }
}

// Each worker loops as bps_tf.elastic's users do: every step a commit (the max of "workers waiting" over
// the generation: where it is above 0, every worker ends the generation at the same step) and a sum that
// must be exact. Meanwhile workers are killed and started again at random times.
TEST(ElasticEngineTest, ChurnNeverGivesAWrongSumAndNeverHangs) {
  ElasticJob job(3, 2, ElasticLimits{1, 3});
  std::vector<std::future<Status>> starting;
  for (int id = 0; id < 3; ++id) starting.push_back(job.Start(id));
  for (auto& f : starting) ASSERT_TRUE(Await(f).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> exact_steps{0}, wrong{0}, broken{0};
  std::mutex errors_mu;
  std::vector<std::string> errors;
  const uint64_t n = 2500;

  auto loop = [&](int id) {
    Worker& w = job.worker(id);
    std::vector<char> out(n * 4);
    while (true) {
      int32_t flags[2] = {w.client->workers_waiting(), stop ? 1 : 0}, agreed[2] = {0, 0};
      auto commit = PushPull(*w.engine, "commit", DataType::kInt32, 2, flags, agreed, ReduceOp::kMax);
      Status s = Await(commit);
      std::vector<char> in = test_data::Fill(DataType::kFloat32, w.engine->rank(), n);
      if (s.ok() && agreed[1] > 0) return;
      if (s.ok() && agreed[0] == 0) {
        auto sum = PushPull(*w.engine, "gradient", DataType::kFloat32, n, in.data(), out.data());
        s = Await(sum);
        if (s.ok()) {
          if (test_data::FirstMismatch(DataType::kFloat32, out, w.engine->size(), n) != n) ++wrong;
          ++exact_steps;
          continue;
        }
      }
      if (!s.ok()) {
        if (!w.client->failure().ok()) return;  // this worker was killed
        if (w.client->generation_failure().ok()) {
          std::lock_guard<std::mutex> lock(errors_mu);
          errors.push_back("worker " + std::to_string(id) + ": " + s.ToString());
          return;
        }
        ++broken;
      }
      if (!ElasticJob::Next(w).ok()) return;
    }
  };

  std::map<int, std::thread> threads;
  for (int id = 0; id < 3; ++id) threads[id] = std::thread(loop, id);
  std::mt19937 random(5);
  const int kRestarts = 6;
  for (int i = 0; i < kRestarts; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 200));
    const int victim = static_cast<int>(random() % 3);
    job.Kill(victim);
    threads[victim].join();
    std::future<Status> back = job.Start(victim);
    ASSERT_TRUE(Await(back, 20).ok()) << "a restarted worker is admitted at the next commit";
    threads[victim] = std::thread(loop, victim);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  Deadline deadline(30);
  for (auto& t : threads) t.second.join();
  EXPECT_FALSE(deadline.expired()) << "nothing hangs";
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_GE(broken.load(), kRestarts) << "every kill broke a generation";
  EXPECT_GT(exact_steps.load(), 3 * kRestarts);
  for (int id = 0; id < 3; ++id) EXPECT_EQ(job.worker(id).engine->size(), 3);
}

}  // namespace
}  // namespace bps

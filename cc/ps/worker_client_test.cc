// A worker's side of the protocol against a real scheduler and server, every node a thread of this process
// over the in-memory transport: joining, declaring, pushing and pulling, ending the generation, and the
// failures a worker must answer every request with.
#include "cc/ps/worker_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "cc/ps/fake_data_mover.h"
#include "cc/ps/job_testing.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::NodeConfig;

// Worker 0's transport, as the test wants it (given the in-memory one).
using WrapTransport = std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)>;

// A scheduler, `servers` servers and `workers` started WorkerClients.
class ClientJob {
 public:
  ClientJob(int workers, int servers, double timeout_s = 20, WrapTransport wrap_worker_0 = nullptr,
            bool shared_memory = true)
      : network_(std::make_shared<InMemoryNetwork>()) {
    auto config = [&](Role role, int id) {
      Config c = NodeConfig(role, workers, servers, id, timeout_s);
      c.shared_memory = shared_memory;
      return c;
    };
    scheduler_transport_ = CreateInMemoryTransport(network_);
    scheduler_ = std::make_unique<Scheduler>(config(Role::kScheduler, 0), scheduler_transport_.get());
    scheduler_thread_ = std::thread([this] { scheduler_->Run().IgnoreError(); });
    for (int s = 0; s < servers; ++s) {
      server_transports_.push_back(CreateInMemoryTransport(network_));
      servers_.push_back(std::make_unique<Server>(config(Role::kServer, 0), server_transports_.back().get()));
    }
    for (int s = 0; s < servers; ++s) server_threads_.emplace_back([this, s] { servers_[s]->Run().IgnoreError(); });
    std::vector<std::future<Status>> starting;
    for (int w = 0; w < workers; ++w) {
      worker_transports_.push_back(CreateInMemoryTransport(network_));
      if (w == 0 && wrap_worker_0) worker_transports_.back() = wrap_worker_0(std::move(worker_transports_.back()));
      clients_.push_back(std::make_unique<WorkerClient>(config(Role::kWorker, w), worker_transports_.back().get()));
    }
    for (auto& client : clients_) {
      starting.push_back(std::async(std::launch::async, [c = client.get()] { return c->Start(); }));
    }
    for (auto& f : starting) {
      Status started = f.get();
      if (!started.ok()) {
        fprintf(stderr, "job did not start: %s\n", started.ToString().c_str());
        std::abort();  // a job that did not start cannot be torn down in order
      }
    }
  }

  ~ClientJob() {
    std::vector<std::thread> ending;  // together: each waits for the others
    if (!ended_) {
      for (auto& c : clients_) ending.emplace_back([c = c.get()] { c->EndGeneration().status().IgnoreError(); });
    }
    for (auto& t : ending) t.join();
    for (auto& t : worker_transports_) t->Shutdown(1);  // as a worker process that leaves
    scheduler_thread_.join();
    for (auto& t : server_threads_) t.join();
    clients_.clear();
    for (auto& t : server_transports_) t->Shutdown(1);
    scheduler_transport_->Shutdown(1);
  }

  WorkerClient& client(int w) { return *clients_[w]; }
  // The test ended the generation itself.
  void MarkEnded() { ended_ = true; }
  void KillServer(int s) {
    server_transports_[s]->Shutdown(0);
    servers_[s]->Stop(Aborted("killed by the test"));
  }

 private:
  std::shared_ptr<InMemoryNetwork> network_;
  std::unique_ptr<Transport> scheduler_transport_;
  std::unique_ptr<Scheduler> scheduler_;
  std::thread scheduler_thread_;
  std::vector<std::unique_ptr<Transport>> server_transports_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::thread> server_threads_;
  std::vector<std::unique_ptr<Transport>> worker_transports_;
  std::vector<std::unique_ptr<WorkerClient>> clients_;
  bool ended_ = false;
};

// Every worker declares `spec` (the scheduler plans it once all have) and gets its plan.
std::vector<StatusOr<PartitionPlan>> DeclareEverywhere(ClientJob& job, int workers, const TensorSpec& spec) {
  std::vector<std::shared_ptr<std::promise<StatusOr<PartitionPlan>>>> promised;
  for (int w = 0; w < workers; ++w) {
    promised.push_back(std::make_shared<std::promise<StatusOr<PartitionPlan>>>());
    job.client(w).Declare(spec, [p = promised.back()](const StatusOr<PartitionPlan>& plan) { p->set_value(plan); });
  }
  std::vector<StatusOr<PartitionPlan>> plans;
  for (auto& p : promised) plans.push_back(p->get_future().get());
  return plans;
}

std::future<Status> PushPull(WorkerClient& client, const Partition& part, uint32_t round, Participant me,
                             const float* input, float* output) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  client.PushPull(part, round, me, DataType::kFloat32, input, output, nullptr,
                  [done](const Status& s) { done->set_value(s); });
  return result;
}

std::future<Status> MovedPushPull(WorkerClient& client, const Partition& part, uint32_t round, Participant me,
                                  char* staging, std::shared_ptr<DataMover> mover) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  char* at = staging + part.offset * sizeof(float);
  client.PushPull(part, round, me, DataType::kFloat32, at, at, nullptr, [done](const Status& s) { done->set_value(s); },
                  /*fused=*/nullptr, std::move(mover));
  return result;
}

std::vector<char> FloatBytes(const std::vector<float>& values) {
  std::vector<char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> Floats(const std::vector<char>& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

TensorSpec FloatTensor(const std::string& name, int64_t count) {
  TensorSpec spec;
  spec.name = name;
  spec.dtype = DataType::kFloat32;
  spec.shape = {count};
  return spec;
}

TEST(WorkerClientTest, StartGivesEachWorkerItsPlaceAndTheServers) {
  ClientJob job(/*workers=*/2, /*servers=*/2);
  EXPECT_EQ(job.client(0).num_workers(), 2);
  EXPECT_EQ(job.client(0).rank() + job.client(1).rank(), 1) << "ranks 0 and 1";
  EXPECT_EQ(job.client(0).generation(), 1);
  EXPECT_EQ(job.client(1).num_servers(), 2);
  EXPECT_TRUE(job.client(0).AllServersOnThisHost()) << "every node of this job advertises the host 'node'";
  EXPECT_TRUE(job.client(0).failure().ok());
}

TEST(WorkerClientTest, DeclaredPartitionsSumOverBothWorkers) {
  ClientJob job(2, 2);
  const int64_t count = 3000;  // more than one 4096-byte partition
  const TensorSpec spec = FloatTensor("w", count);
  std::vector<StatusOr<PartitionPlan>> plans = DeclareEverywhere(job, 2, spec);
  ASSERT_TRUE(plans[0].ok()) << plans[0].status().ToString();
  ASSERT_TRUE(plans[1].ok());
  ASSERT_GT(plans[0].value().partitions.size(), 1u);
  std::vector<float> in[2], out[2];
  for (int w = 0; w < 2; ++w) {
    in[w].resize(count);
    out[w].assign(count, -1);
    for (int64_t i = 0; i < count; ++i) in[w][i] = static_cast<float>(i * (w + 1));
  }
  std::vector<std::future<Status>> done;
  for (int w = 0; w < 2; ++w) {
    const Participant me{job.client(w).rank(), 2};
    for (const Partition& part : plans[w].value().partitions) {
      done.push_back(PushPull(job.client(w), part, 1, me, in[w].data() + part.offset, out[w].data() + part.offset));
    }
  }
  for (auto& d : done) EXPECT_TRUE(d.get().ok());
  for (int w = 0; w < 2; ++w) {
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out[w][i], static_cast<float>(3 * i)) << "worker " << w << " at " << i;
  }
}

// Worker 0's data lives behind a DataMover (as a GPU tensor's does); worker 1's in plain memory. Over three
// rounds, with the server on this host (the first round through the transport, later ones through its
// shared memory) and without shared memory, every push and sum goes through the mover and the sums are exact;
// also when the mover's copies land only once waited for (a push sent or a sum reported before its copy
// was waited for would be wrong).
class MoverTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(MoverTest, PushesAndSumsGoThroughTheMover) {
  const auto [shared_memory, deferred] = GetParam();
  ClientJob job(2, 1, 20, nullptr, shared_memory);
  const int64_t count = 3000;  // more than one 4096-byte partition
  auto plans = DeclareEverywhere(job, 2, FloatTensor("moved", count));
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  std::vector<char> staging(count * sizeof(float));
  auto mover = std::make_shared<testing::FakeDataMover>(staging.data(), std::vector<char>(), deferred);
  const int parts = static_cast<int>(plans[0].value().partitions.size());
  for (uint32_t round = 1; round <= 3; ++round) {
    std::vector<float> mine(count), other(count), out(count, -1);
    for (int64_t i = 0; i < count; ++i) {
      mine[i] = static_cast<float>(i * round);
      other[i] = static_cast<float>(7 * i + round);
    }
    mover->set_device(FloatBytes(mine));
    std::memset(staging.data(), 0x7f, staging.size());  // garbage: only the mover may give the staging meaning
    std::vector<std::future<Status>> done;
    for (const Partition& part : plans[0].value().partitions) {
      done.push_back(MovedPushPull(job.client(0), part, round, Participant{job.client(0).rank(), 2}, staging.data(),
                                   mover));
    }
    for (const Partition& part : plans[1].value().partitions) {
      done.push_back(PushPull(job.client(1), part, round, Participant{job.client(1).rank(), 2},
                              other.data() + part.offset, out.data() + part.offset));
    }
    for (auto& d : done) {
      Status s = d.get();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    const std::vector<float> moved = Floats(mover->device());
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(moved[i], mine[i] + other[i]) << "round " << round << " element " << i;
      ASSERT_EQ(out[i], mine[i] + other[i]) << "round " << round << " element " << i;
    }
  }
  const testing::FakeDataMover::Counts counts = mover->counts();
  EXPECT_EQ(counts.to_staging + counts.to_elsewhere, 3 * parts);
  EXPECT_EQ(counts.from_staging + counts.from_elsewhere, 3 * parts);
  if (shared_memory) {
    EXPECT_EQ(counts.to_staging, parts) << "the first round goes through the transport";
    EXPECT_EQ(counts.to_elsewhere, 2 * parts) << "later rounds go straight into the server's shared memory";
    EXPECT_EQ(counts.from_elsewhere, 2 * parts) << "and their sums straight out of it";
  } else {
    EXPECT_EQ(counts.to_elsewhere + counts.from_elsewhere, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedMemoryOrNotCopiesDeferredOrNot, MoverTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(WorkerClientTest, AnEchoedSumLeavesTheMoversDataAsItIs) {
  ClientJob job(2, 1);
  const int64_t count = 500;
  auto plans = DeclareEverywhere(job, 2, FloatTensor("echoed", count));
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  ASSERT_EQ(plans[0].value().partitions.size(), 1u);
  const Partition part = plans[0].value().partitions[0];
  std::vector<float> mine(count);
  for (int64_t i = 0; i < count; ++i) mine[i] = static_cast<float>(i + 1);
  std::vector<char> staging(count * sizeof(float));
  auto mover = std::make_shared<testing::FakeDataMover>(staging.data(), FloatBytes(mine));
  for (uint32_t round = 1; round <= 2; ++round) {  // through the transport, then shared memory
    std::vector<float> out(count, -1);
    auto pushed =
        MovedPushPull(job.client(0), part, round, Participant{job.client(0).rank(), 2}, staging.data(), mover);
    // Worker 1 pushes zeros: the sum is worker 0's push, which comes back to it as an echo, without bytes.
    auto zeros = PushPull(job.client(1), part, round, Participant{job.client(1).rank(), 2}, nullptr, out.data());
    Status s = pushed.get();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = zeros.get();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(out, mine) << "round " << round;
    EXPECT_EQ(Floats(mover->device()), mine) << "round " << round;
  }
  EXPECT_EQ(mover->counts().to_staging + mover->counts().to_elsewhere, 2);
  EXPECT_EQ(mover->counts().from_staging + mover->counts().from_elsewhere, 0) << "an echo moves nothing back";
}

TEST(WorkerClientTest, AMoverThatFailsFailsItsRequestWithItsMessage) {
  ClientJob job(2, 1);
  const int64_t count = 500;
  auto plans = DeclareEverywhere(job, 2, FloatTensor("failing", count));
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  const Partition part = plans[0].value().partitions[0];
  std::vector<float> other(count, 2), out(count);
  std::vector<char> staging(count * sizeof(float));
  auto mover = std::make_shared<testing::FakeDataMover>(staging.data(), FloatBytes(std::vector<float>(count, 1)));
  // The sum cannot be moved back: worker 0's request fails, worker 1's completes.
  mover->FailFromHost("the device is gone");
  auto pushed = MovedPushPull(job.client(0), part, 1, Participant{job.client(0).rank(), 2}, staging.data(), mover);
  auto plain = PushPull(job.client(1), part, 1, Participant{job.client(1).rank(), 2}, other.data(), out.data());
  Status s = pushed.get();
  EXPECT_EQ(s.code(), Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("the device is gone"), std::string::npos) << s.message();
  ASSERT_TRUE(plain.get().ok());
  EXPECT_EQ(out, std::vector<float>(count, 3));
  // The push cannot be moved to the host: the request fails at once, nothing is sent.
  mover->FailFromHost("");
  mover->FailToHost("the copy engine is busy");
  s = MovedPushPull(job.client(0), part, 2, Participant{job.client(0).rank(), 2}, staging.data(), mover).get();
  EXPECT_EQ(s.code(), Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("the copy engine is busy"), std::string::npos) << s.message();
  EXPECT_TRUE(job.client(0).failure().ok()) << "a failed move fails its request, not the job";
}

// A started copy whose wait times out may still write into memory the next rounds use: the job is
// aborted, and the request fails saying why.
TEST(WorkerClientTest, AMoversCopyThatTimesOutAbortsTheJob) {
  ClientJob job(2, 1);
  const int64_t count = 500;
  auto plans = DeclareEverywhere(job, 2, FloatTensor("hung", count));
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  const Partition part = plans[0].value().partitions[0];
  std::vector<float> other(count, 2), out(count);
  std::vector<char> staging(count * sizeof(float));
  auto mover = std::make_shared<testing::FakeDataMover>(staging.data(), FloatBytes(std::vector<float>(count, 1)),
                                                        /*deferred=*/true);
  mover->FailFromHost("the copy did not finish within BYTEPS_TIMEOUT", Code::kDeadlineExceeded);
  auto pushed = MovedPushPull(job.client(0), part, 1, Participant{job.client(0).rank(), 2}, staging.data(), mover);
  auto plain = PushPull(job.client(1), part, 1, Participant{job.client(1).rank(), 2}, other.data(), out.data());
  Status s = pushed.get();
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("BYTEPS_TIMEOUT"), std::string::npos) << s.message();
  EXPECT_TRUE(plain.get().ok()) << "the other worker's round completes";
  for (int i = 0; i < 200 && job.client(0).failure().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(job.client(0).failure().ok()) << "a hung copy aborts the job";
}

TEST(WorkerClientTest, EndGenerationWaitsForEveryWorkerAndNamesTheLast) {
  ClientJob job(2, 1);
  job.MarkEnded();
  std::future<StatusOr<int>> first = std::async(std::launch::async, [&] { return job.client(0).EndGeneration(); });
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "worker 0 waits for worker 1";
  StatusOr<int> second = job.client(1).EndGeneration();
  StatusOr<int> first_result = first.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(first_result.ok()) << first_result.status().ToString();
  EXPECT_EQ(first_result.value(), job.client(1).rank());
  EXPECT_EQ(second.value(), job.client(1).rank());
}

TEST(WorkerClientTest, AbortFailsPendingRequestsOfEveryWorker) {
  ClientJob job(2, 1);
  const TensorSpec spec = FloatTensor("g", 16);
  auto plans = DeclareEverywhere(job, 2, spec);
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  const StatusOr<PartitionPlan>& plan = plans[0];
  std::vector<float> data(16, 1);
  // Worker 1 never pushes: worker 0's request waits, until worker 1 aborts the job.
  auto waiting = PushPull(job.client(0), plan.value().partitions[0], 1, Participant{job.client(0).rank(), 2},
                          data.data(), data.data());
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  job.client(1).RequestAbort("a test stopped it");
  Status status = waiting.get();
  EXPECT_EQ(status.code(), Code::kAborted) << status.ToString();
  EXPECT_NE(status.message().find("a test stopped it"), std::string::npos) << status.message();
  EXPECT_FALSE(job.client(1).failure().ok());
  auto late = PushPull(job.client(1), plan.value().partitions[0], 1, Participant{job.client(1).rank(), 2},
                       data.data(), data.data());
  EXPECT_EQ(late.get().code(), Code::kAborted) << "a request after the failure is answered at once";
  EXPECT_FALSE(job.client(1).rejoinable()) << "an aborted job is not joined again";
}

TEST(WorkerClientTest, LosingAServerFailsItsRequestsAndNamesIt) {
  ClientJob job(2, 1);
  const TensorSpec spec = FloatTensor("h", 16);
  auto plans = DeclareEverywhere(job, 2, spec);
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  const StatusOr<PartitionPlan>& plan = plans[0];
  std::vector<float> data(16, 1);
  auto waiting = PushPull(job.client(0), plan.value().partitions[0], 1, Participant{job.client(0).rank(), 2},
                          data.data(), data.data());
  job.KillServer(0);
  Status status = waiting.get();
  EXPECT_EQ(status.code(), Code::kUnavailable) << status.ToString();
  // The worker's own connection or the scheduler's ABORT reports it first; both name the server.
  EXPECT_NE(status.message().find("server 0"), std::string::npos) << status.message();
  EXPECT_EQ(job.client(0).failure().code(), Code::kUnavailable);
}

// A transport whose next PUSH_MANY, once armed, is delivered but never reported sent: what a transport that
// loses a send's report would do to the worker's fused small pushes.
class UnreportedPushMany : public Transport {
 public:
  UnreportedPushMany(std::unique_ptr<Transport> inner, std::shared_ptr<std::atomic<bool>> armed)
      : inner_(std::move(inner)), armed_(std::move(armed)) {}
  void SetHandler(MessageHandler* handler) override { inner_->SetHandler(handler); }
  StatusOr<std::string> Listen(const std::string& host, int port) override { return inner_->Listen(host, port); }
  StatusOr<PeerId> Connect(const std::string& address, double timeout_s, Link link) override {
    return inner_->Connect(address, timeout_s, link);
  }
  void Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) override {
    auto m = Message::Decode(header);
    if (m.ok() && m.value().type == MessageType::kPushMany && armed_->exchange(false)) on_sent = [](const Status&) {};
    inner_->Send(to, std::move(header), payload, length, std::move(on_sent));
  }
  std::string PeerName(PeerId peer) override { return inner_->PeerName(peer); }
  void Shutdown(double timeout_s) override { inner_->Shutdown(timeout_s); }

 private:
  std::unique_ptr<Transport> inner_;
  std::shared_ptr<std::atomic<bool>> armed_;
};

TEST(WorkerClientTest, SmallPushesLeaveWhenTheMessageBeforeThemIsNeverReportedSent) {
  auto armed = std::make_shared<std::atomic<bool>>(false);
  ClientJob job(2, 1, /*timeout_s=*/10,
                [armed](std::unique_ptr<Transport> t) { return std::make_unique<UnreportedPushMany>(std::move(t), armed); },
                /*shared_memory=*/false);
  const int64_t count = 16;
  auto plans = DeclareEverywhere(job, 2, FloatTensor("small", count));
  ASSERT_TRUE(plans[0].ok() && plans[1].ok()) << plans[0].status().ToString();
  const Partition part = plans[0].value().partitions[0];
  std::vector<float> in[2], out[2];
  for (int w = 0; w < 2; ++w) {
    in[w].assign(count, static_cast<float>(w + 1));
    out[w].assign(count, -1);
  }
  // Worker 0's pushes are fused: the first PUSH_MANY arrives, but its send is never reported.
  auto fused_push = [&](uint32_t round) {
    auto done = std::make_shared<std::promise<Status>>();
    FusedPushes fused;
    job.client(0).PushPull(part, round, Participant{job.client(0).rank(), 2}, DataType::kFloat32, in[0].data(),
                           out[0].data(), nullptr, [done](const Status& s) { done->set_value(s); }, &fused);
    job.client(0).SendFused(&fused);
    return done->get_future();
  };
  armed->store(true);
  auto first = fused_push(1);
  auto other_first = PushPull(job.client(1), part, 1, Participant{job.client(1).rank(), 2}, in[1].data(),
                              out[1].data());
  ASSERT_EQ(first.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(other_first.get().ok());
  ASSERT_FALSE(armed->load()) << "the fused push went as a PUSH_MANY";
  // The next small push waits for that message's report, which never comes...
  auto second = fused_push(2);
  auto other_second = PushPull(job.client(1), part, 2, Participant{job.client(1).rank(), 2}, in[1].data(),
                               out[1].data());
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  // ...until it waited a tenth of BYTEPS_TIMEOUT: then it leaves without it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  job.client(0).FailExpiredRequests();
  ASSERT_EQ(second.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "the small push never left";
  EXPECT_TRUE(second.get().ok());
  EXPECT_TRUE(other_second.get().ok());
  for (int w = 0; w < 2; ++w) {
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out[w][i], 3.0f) << "worker " << w << " at " << i;
  }
}

}  // namespace
}  // namespace bps

// Multi-rank tests of the collectives beyond a sum over every worker: other reduce ops, process sets,
// published tensors, workers that joined, and per-machine tensors. Every node is a thread in this process,
// connected by the in-memory transport.
#include "cc/runtime/engine.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/reducer/test_data.h"
#include "cc/runtime/engine_testing.h"
#include "cc/runtime/local_job_testing.h"

namespace bps {
namespace {

using testing::Await;
using testing::Collective;
using testing::LocalJob;
using testing::PushPull;
using testing::Read;
using test_data::Value;

TEST(EngineTest, MinMaxAndProductAreReducedOnTheServers) {
  LocalJob job(3, 2);
  const int64_t n = 3000;  // over two servers' partitions (partition_bytes 4096 in these tests)
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
                         DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      std::vector<std::vector<char>> in(3), out(3, std::vector<char>(n * DataTypeSize(dtype)));
      std::vector<std::future<Status>> done;
      for (int w = 0; w < 3; ++w) {
        in[w] = test_data::Fill(dtype, w, n);
        // Small values so that products stay exact in every dtype.
        for (int64_t i = 0; i < n; ++i) test_data::Write(dtype, (i + w) % 5 - 2, in[w].data() + i * DataTypeSize(dtype));
        done.push_back(Collective(job.worker(w), std::string(ReduceOpName(op)) + DataTypeName(dtype), dtype, {n},
                                  in[w].data(), out[w].data(), op));
      }
      for (int w = 0; w < 3; ++w) {
        ASSERT_TRUE(Await(done[w]).ok());
        for (int64_t i = 0; i < n; i += 7) {
          double a = (i + 0) % 5 - 2, b = (i + 1) % 5 - 2, c = (i + 2) % 5 - 2;
          double want = op == ReduceOp::kMin ? std::min({a, b, c}) : op == ReduceOp::kMax ? std::max({a, b, c}) : a * b * c;
          ASSERT_EQ(Read(dtype, out[w], i), want) << ReduceOpName(op) << " " << DataTypeName(dtype) << " at " << i;
        }
      }
    }
  }
}

TEST(EngineTest, WorkersWhoDisagreeOnTheOpFail) {
  LocalJob job(2, 1);
  std::vector<float> in(4, 1), out0(4), out1(4);
  auto a = Collective(job.worker(0), "op", DataType::kFloat32, {4}, in.data(), out0.data(), ReduceOp::kMax);
  auto b = Collective(job.worker(1), "op", DataType::kFloat32, {4}, in.data(), out1.data(), ReduceOp::kMin);
  Status sa = Await(a), sb = Await(b);
  EXPECT_EQ(sa.code(), Code::kInvalidArgument);
  EXPECT_NE(sb.message().find("max"), std::string::npos) << sb.message();
}

TEST(EngineTest, AProcessSetSumsAmongItsMembersOnly) {
  LocalJob job(4, 2);
  const int64_t n = 5000;
  std::vector<std::vector<float>> in(4, std::vector<float>(n)), out(4, std::vector<float>(n));
  std::vector<std::future<Status>> done;
  for (int w : {0, 2, 3}) {
    for (int64_t i = 0; i < n; ++i) in[w][i] = w * 100 + i;
    done.push_back(Collective(job.worker(w), "subset", DataType::kFloat32, {n}, in[w].data(), out[w].data(),
                              ReduceOp::kSum, {0, 2, 3}));
  }
  // Worker 1, outside the set, runs its own tensor meanwhile; a job-wide one would wait for it.
  std::vector<float> mine(8, 5), alone(8);
  auto outsider = Collective(job.worker(1), "alone", DataType::kFloat32, {8}, mine.data(), alone.data(),
                             ReduceOp::kSum, {1});
  ASSERT_TRUE(Await(outsider).ok());
  EXPECT_EQ(alone[3], 5);
  for (auto& d : done) ASSERT_TRUE(Await(d).ok());
  for (int w : {0, 2, 3}) {
    for (int64_t i = 0; i < n; i += 101) ASSERT_EQ(out[w][i], 500 + 3 * i) << w << " " << i;
  }
  // A worker outside the set is refused at once.
  std::vector<float> x(4), y(4);
  auto refused = Collective(job.worker(1), "subset", DataType::kFloat32, {n}, in[1].data(), out[1].data(),
                            ReduceOp::kSum, {0, 2, 3});
  Status s = Await(refused);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("process set"), std::string::npos) << s.message();
}

TEST(EngineTest, APublishedTensorIsFetchedByReadersAndNobodyWaitsForAbsentOnes) {
  LocalJob job(3, 2);
  const int64_t n = 3000;
  std::vector<float> value(n), out0(n), out1(n), out2(n, -1);
  for (int64_t i = 0; i < n; ++i) value[i] = i * 0.5f;
  // The publisher's call completes without any reader.
  auto published = Collective(job.worker(1), "initial/kernel", DataType::kFloat32, {n}, value.data(), out1.data(),
                              ReduceOp::kSum, {}, TensorScope::kPublished, 1);
  ASSERT_TRUE(Await(published, 10).ok());
  EXPECT_EQ(out1[7], 3.5f);
  // Readers get its value, whenever they ask; worker 2 never asks (a variable it never creates).
  auto read = Collective(job.worker(0), "initial/kernel", DataType::kFloat32, {n}, nullptr, out0.data(),
                         ReduceOp::kSum, {}, TensorScope::kPublished, 1);
  ASSERT_TRUE(Await(read, 10).ok());
  for (int64_t i = 0; i < n; i += 13) ASSERT_EQ(out0[i], i * 0.5f);
  // A reader that asks first waits for the publisher.
  std::vector<float> later(4), got(4);
  for (int i = 0; i < 4; ++i) later[i] = 40 + i;
  auto early = Collective(job.worker(2), "initial/bias", DataType::kFloat32, {4}, nullptr, got.data(),
                          ReduceOp::kSum, {}, TensorScope::kPublished, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(early.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  auto publish = Collective(job.worker(0), "initial/bias", DataType::kFloat32, {4}, later.data(), later.data(),
                            ReduceOp::kSum, {}, TensorScope::kPublished, 0);
  ASSERT_TRUE(Await(publish).ok());
  ASSERT_TRUE(Await(early).ok());
  EXPECT_EQ(got[3], 43);
}

TEST(EngineTest, RoundsAJoinedWorkerMissesCompleteWithoutIt) {
  LocalJob job(3, 2);
  const int64_t n = 3000;  // over both servers
  std::vector<std::vector<float>> in(3, std::vector<float>(n)), out(3, std::vector<float>(n));
  for (int w = 0; w < 3; ++w) {
    for (int64_t i = 0; i < n; ++i) in[w][i] = (w + 1) * 1000 + i;
  }
  // Declared by all three before anyone joins.
  std::vector<std::future<Status>> first;
  for (int w = 0; w < 3; ++w) {
    first.push_back(PushPull(job.worker(w), "before", DataType::kFloat32, {n}, in[w].data(), out[w].data()));
  }
  for (auto& f : first) ASSERT_TRUE(Await(f).ok());
  auto joined2 = std::async(std::launch::async, [&] { return job.worker(2).Join(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int step = 0; step < 3; ++step) {
    // A tensor worker 2 declared and one it never saw; a sum and a max.
    std::vector<std::future<Status>> done;
    std::vector<std::vector<float>> maxima(2, std::vector<float>(n));
    for (int w = 0; w < 2; ++w) {
      done.push_back(PushPull(job.worker(w), "before", DataType::kFloat32, {n}, in[w].data(), out[w].data()));
      done.push_back(Collective(job.worker(w), "after", DataType::kFloat32, {n}, in[w].data(), maxima[w].data(),
                                ReduceOp::kMax));
    }
    for (auto& f : done) ASSERT_TRUE(Await(f).ok());
    for (int w = 0; w < 2; ++w) {
      for (int64_t i = 0; i < n; i += 97) {
        ASSERT_EQ(out[w][i], 3000 + 2 * i) << "sum without worker 2, step " << step << " at " << i;
        ASSERT_EQ(maxima[w][i], 2000 + i) << "max without worker 2, step " << step << " at " << i;
      }
    }
  }
  EXPECT_EQ(joined2.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout) << "join waits for all";
  auto joined1 = std::async(std::launch::async, [&] { return job.worker(1).Join(); });
  std::vector<float> alone(n);
  auto solo = PushPull(job.worker(0), "before", DataType::kFloat32, {n}, in[0].data(), alone.data());
  ASSERT_TRUE(Await(solo).ok());
  EXPECT_EQ(alone[5], 1005);
  StatusOr<int> last0 = job.worker(0).Join();
  StatusOr<int> last1 = joined1.get();
  StatusOr<int> last2 = joined2.get();
  ASSERT_TRUE(last0.ok() && last1.ok() && last2.ok()) << last2.status().ToString();
  EXPECT_EQ(last0.value(), 0);
  EXPECT_EQ(last1.value(), 0);
  EXPECT_EQ(last2.value(), 0);
}

TEST(EngineTest, PerMachineTensorsSumOneContributionPerMachine) {
  const int machines = 3, local_size = 2;
  LocalJob job(machines, 2, /*timeout_s=*/20, /*credit_bytes=*/4 * 4096, local_size);
  const int n = 5000;  // several partitions per slice
  std::vector<std::vector<float>> slice(machines * local_size, std::vector<float>(n));
  std::vector<std::vector<double>> everyone(machines * local_size, std::vector<double>(7));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<Status>> done;
    for (int rank = 0; rank < machines * local_size; ++rank) {
      const int machine = rank / local_size, local = rank % local_size;
      for (int i = 0; i < n; ++i) slice[rank][i] = float(round + 10 * machine + 100 * local + i % 17);
      for (int i = 0; i < 7; ++i) everyone[rank][i] = rank + i;
      done.push_back(PushPull(job.worker(rank), "grad#slice" + std::to_string(local), DataType::kFloat32, {n},
                              slice[rank].data(), slice[rank].data(), 0, TensorScope::kMachine));
      done.push_back(PushPull(job.worker(rank), "bias", DataType::kFloat64, {7}, everyone[rank].data(),
                              everyone[rank].data()));
    }
    for (auto& f : done) ASSERT_TRUE(Await(f).ok());
    for (int rank = 0; rank < machines * local_size; ++rank) {
      const int local = rank % local_size;
      for (int i = 0; i < n; i += 61) {
        ASSERT_EQ(slice[rank][i], float(machines * (round + 100 * local + i % 17) + 10 * (0 + 1 + 2)));
      }
      for (int i = 0; i < 7; ++i) ASSERT_EQ(everyone[rank][i], double(0 + 1 + 2 + 3 + 4 + 5 + 6 * i));
    }
  }
}

TEST(EngineTest, TwoProcessesOfOneMachinePushingAPerMachineTensorFail) {
  LocalJob job(2, 1, /*timeout_s=*/20, /*credit_bytes=*/4 * 4096, /*local_size=*/2);
  std::vector<std::vector<float>> data(4, std::vector<float>(8));
  std::vector<std::future<Status>> done;
  for (int rank : {0, 1, 2}) {  // ranks 0 and 1 are machine 0
    done.push_back(PushPull(job.worker(rank), "slice", DataType::kFloat32, {8}, data[rank].data(), data[rank].data(),
                            0, TensorScope::kMachine));
  }
  for (auto& f : done) {
    Status s = Await(f);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("once per worker machine"), std::string::npos) << s.message();
  }
}

TEST(EngineTest, ASecondProcessPushingAPerMachineTensorAfterThePlanFailsEveryWorker) {
  LocalJob job(2, 1, /*timeout_s=*/20, /*credit_bytes=*/4 * 4096, /*local_size=*/2);
  std::vector<std::vector<float>> data(4, std::vector<float>(8));
  auto push = [&](int rank) {
    return PushPull(job.worker(rank), "slice", DataType::kFloat32, {8}, data[rank].data(), data[rank].data(), 0,
                    TensorScope::kMachine);
  };
  auto first = push(0), second = push(2);  // one process of each machine: planned and summed
  ASSERT_TRUE(Await(first).ok());
  ASSERT_TRUE(Await(second).ok());
  for (int rank : {1, 0, 2}) {  // rank 1 (machine 0) pushes it too: the job ends, every worker hears why
    auto f = push(rank);
    Status s = Await(f);
    EXPECT_FALSE(s.ok()) << "rank " << rank;
    EXPECT_NE(s.message().find("once per worker machine"), std::string::npos) << s.message();
  }
}

TEST(EngineTest, AMachineThatNeverPushesAPerMachineTensorIsNamed) {
  LocalJob job(2, 1, /*timeout_s=*/1.5, /*credit_bytes=*/4 * 4096, /*local_size=*/2);
  std::vector<float> a(10);
  auto f = PushPull(job.worker(1), "lonely slice", DataType::kFloat32, {10}, a.data(), a.data(), 0,
                    TensorScope::kMachine);
  Status s = Await(f, 20);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("not by worker machine(s) 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace bps

// Multi-rank tests of the whole worker/server/scheduler protocol, sums over every worker: every dtype and
// size, many in flight, tiny credit windows, partitions of zeros, and rounds of one tensor. Every node is a
// thread in this process, connected by the in-memory transport.
#include "cc/runtime/engine.h"
#include "cc/runtime/engine_testing.h"
#include "cc/runtime/local_job_testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <random>
#include <thread>

#include "cc/common/clock.h"
#include "cc/ps/fake_data_mover.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/reducer/test_data.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::Await;
using testing::LocalJob;
using testing::PushPull;
using testing::Read;

using test_data::Value;

void Fill(DataType dtype, int w, uint64_t n, std::vector<char>* bytes) { *bytes = test_data::Fill(dtype, w, n); }

// Every worker push_pulls test data of every (dtype, size), twice with different data (the first round of a
// key sets up what later rounds use, such as shared memory); each must get the exact sum.
void ExpectEveryWorkerGetsTheSum(LocalJob& job, const std::vector<DataType>& dtypes,
                                 const std::vector<uint64_t>& sizes) {
  const int workers = job.workers();
  for (DataType dtype : dtypes) {
    for (uint64_t n : sizes) {
      std::string name = std::string(DataTypeName(dtype)) + "/" + std::to_string(n);
      for (int round = 0; round < 2; ++round) {
        const int shift = round * 5;  // another rank's data: different values each round
        std::vector<std::vector<char>> in(workers), out(workers);
        std::vector<std::future<Status>> done;
        for (int w = 0; w < workers; ++w) {
          Fill(dtype, w + shift, n, &in[w]);
          out[w].assign(in[w].size(), 0);
          done.push_back(PushPull(job.worker(w), name, dtype, {int64_t(n)}, in[w].data(), out[w].data()));
        }
        for (int w = 0; w < workers; ++w) {
          Status s = Await(done[w]);
          ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
          for (uint64_t i = 0; i < n; ++i) {
            double expected = 0;
            for (int v = 0; v < workers; ++v) expected += Value(v + shift, i);
            ASSERT_EQ(Read(dtype, out[w], i), expected) << name << " round " << round << " element " << i
                                                        << " worker " << w;
          }
        }
      }
    }
  }
}

// How many times this process maps a server's shared arena (cc/common/shared_arena.h): once per server that
// has workers on its host, once more per worker that maps it.
int SharedArenaMappings() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) count += line.find("memfd:bps_tf_server") != std::string::npos;
  return count;
}

class SumTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SumTest, EveryDtypeAndSizeMatchesTheReference) {
  LocalJob job(std::get<0>(GetParam()), std::get<1>(GetParam()));
  ASSERT_EQ(job.worker(0).slice_bytes(), 0u) << "one host: whole partitions";
  // 4096-byte partitions: for float32 1024 elements is exactly one partition.
  ExpectEveryWorkerGetsTheSum(job, {std::begin(test_data::kAllTypes), std::end(test_data::kAllTypes)},
                              {0, 1, 7, 1023, 1024, 1025, 100000});
  const int workers = std::get<0>(GetParam()), servers = std::get<1>(GetParam());
  EXPECT_EQ(SharedArenaMappings(), servers * (1 + workers)) << "each server's arena, and each worker's view of it";
}

// Workers and servers on hosts of their own: partitions cross the "network" in slices (1000 bytes here,
// partitions 4096), each summed on its own.
TEST(EngineTest, SlicedPartitionsBetweenHostsSumExactly) {
  LocalJob job(3, 2, /*timeout_s=*/20, /*credit_bytes=*/4 * 4096, /*local_size=*/1, /*separate_hosts=*/true,
               /*slice_bytes=*/1000);
  ASSERT_EQ(job.worker(0).slice_bytes(), 1000u);
  ASSERT_EQ(SharedArenaMappings(), 0) << "no server shares a host with a worker";
  ExpectEveryWorkerGetsTheSum(job, {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64, DataType::kInt64},
                              {1, 249, 250, 1025, 100003});
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
      // Each worker enqueues in a different order: keys come from names, not order.
      int idx = w == 0 ? t : kTensors - 1 - t;
      auto& u = data[w][idx];
      done[w].push_back(PushPull(job.worker(w), "t" + std::to_string(idx), DataType::kFloat32,
                                 {int64_t(u.size())}, u.data(), u.data(), idx % 5));
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

// A gather: each worker's rows sit at its own offset of a tensor that is zero elsewhere. Partitions wholly
// outside a worker's rows go as "zeros" without bytes: the input there holds garbage (which would spoil the
// sums if it were sent), while partitions that straddle a range's edge are sent with their real zeros.
// Row counts change from round to round, so a round's first push is sometimes zeros, sometimes data.
// Sums that are all zeros, or only the receiver's own push, come back without bytes; worker 1 works in place.
TEST(EngineTest, PartitionsOutsideTheNonzeroRangeArePushedAsZeros) {
  const int workers = 3;
  LocalJob job(workers, 2);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64}) {
    const size_t element = DataTypeSize(dtype);
    const uint64_t per_partition = 4096 / element;  // the job's partition size
    for (int round = 0; round < 6; ++round) {
      std::vector<uint64_t> begin(workers), end(workers);
      uint64_t total = 0;
      for (int w = 0; w < workers; ++w) {
        begin[w] = total;
        total += ((round * 7 + w * 3) % 5) * 700;  // 0 to 2800 elements, some workers none
        end[w] = total;
      }
      total += 1500;  // a tail that no worker fills
      std::string name = std::string(DataTypeName(dtype)) + "/" + std::to_string(total);
      std::vector<std::vector<char>> in(workers, std::vector<char>(total * element, 0)), out(workers);
      std::vector<std::future<Status>> done;
      for (int w = 0; w < workers; ++w) {
        for (uint64_t i = 0; i < total; ++i) {
          const bool mine = i >= begin[w] && i < end[w];
          const bool unsent = (i / per_partition + 1) * per_partition <= begin[w] || i / per_partition * per_partition >= end[w];
          if (mine) test_data::Write(dtype, Value(w, i), in[w].data() + i * element);
          if (unsent) test_data::Write(dtype, 99, in[w].data() + i * element);
        }
        out[w].assign(total * element, 1);
        auto done_promise = std::make_shared<std::promise<Status>>();
        done.push_back(done_promise->get_future());
        PushPullRequest r;
        r.name = name;
        r.dtype = dtype;
        r.shape = {int64_t(total)};
        r.input = in[w].data();
        r.output = w == 1 ? in[w].data() : out[w].data();
        r.nonzero_begin = begin[w];
        r.nonzero_end = end[w];
        r.done = [done_promise](const Status& s) { done_promise->set_value(s); };
        job.worker(w).Enqueue(std::move(r));
      }
      for (int w = 0; w < workers; ++w) {
        Status s = Await(done[w]);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        const std::vector<char>& result = w == 1 ? in[w] : out[w];
        for (uint64_t i = 0; i < total; ++i) {
          double expected = 0;
          for (int v = 0; v < workers; ++v) expected += i >= begin[v] && i < end[v] ? Value(v, i) : 0;
          ASSERT_EQ(Read(dtype, result, i), expected) << name << " element " << i << " worker " << w;
        }
      }
    }
  }
}

// Worker 0's tensors live behind DataMovers (as GPU tensors do), worker 1's in plain memory: a small tensor
// (fused if it had no mover) and one of several partitions over both servers, rounds through the transport
// and then the servers' shared memory; every sum exact, every byte through the movers.
TEST(EngineTest, TensorsBehindAMoverSumExactly) {
  LocalJob job(2, 2);
  for (int64_t count : {int64_t(100), int64_t(5000)}) {
    const std::string name = "moved/" + std::to_string(count);
    std::vector<char> staging(count * sizeof(float));
    auto mover = std::make_shared<testing::FakeDataMover>(staging.data(), std::vector<char>());
    for (int round = 0; round < 3; ++round) {
      std::vector<float> mine(count), other(count), out(count, -1);
      for (int64_t i = 0; i < count; ++i) {
        mine[i] = static_cast<float>(i * (round + 1));
        other[i] = static_cast<float>(3 * i - round);
      }
      std::vector<char> device(count * sizeof(float));
      std::memcpy(device.data(), mine.data(), device.size());
      mover->set_device(device);
      std::memset(staging.data(), 0x7f, staging.size());
      auto done_promise = std::make_shared<std::promise<Status>>();
      auto moved = done_promise->get_future();
      PushPullRequest r;
      r.name = name;
      r.shape = {count};
      r.input = staging.data();
      r.output = staging.data();
      r.mover = mover;
      r.done = [done_promise](const Status& s) { done_promise->set_value(s); };
      job.worker(0).Enqueue(std::move(r));
      auto plain = PushPull(job.worker(1), name, DataType::kFloat32, {count}, other.data(), out.data());
      Status s = Await(moved);
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = Await(plain);
      ASSERT_TRUE(s.ok()) << s.ToString();
      device = mover->device();
      std::vector<float> sum(count);
      std::memcpy(sum.data(), device.data(), device.size());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(sum[i], mine[i] + other[i]) << name << " round " << round << " element " << i;
        ASSERT_EQ(out[i], mine[i] + other[i]) << name << " round " << round << " element " << i;
      }
    }
    const testing::FakeDataMover::Counts counts = mover->counts();
    EXPECT_GT(counts.to_elsewhere, 0) << name << ": later rounds straight into the servers' shared memory";
    EXPECT_GT(counts.from_elsewhere, 0) << name;
  }
}

TEST(EngineTest, AMoverIsRefusedForWhatItCannotServe) {
  LocalJob job(1, 1);
  std::vector<float> staging(64), other(64);
  auto mover = std::make_shared<testing::FakeDataMover>(reinterpret_cast<char*>(staging.data()),
                                                        std::vector<char>(64 * sizeof(float)));
  struct Case {
    const char* why;
    std::function<void(PushPullRequest*)> change;
  };
  const std::vector<Case> cases = {
      {"compressed", [](PushPullRequest* r) { r->compression.kind = CodecKind::kOneBit; }},
      {"published", [](PushPullRequest* r) { r->scope = TensorScope::kPublished; }},
      {"process set", [](PushPullRequest* r) { r->members = {0}; }},
      {"nonzero range", [](PushPullRequest* r) { r->nonzero_end = 10; }},
      {"input and output", [&](PushPullRequest* r) { r->output = other.data(); }},
  };
  for (const Case& c : cases) {
    auto done_promise = std::make_shared<std::promise<Status>>();
    auto done = done_promise->get_future();
    PushPullRequest r;
    r.name = std::string("refused/") + c.why;
    r.shape = {64};
    r.input = staging.data();
    r.output = staging.data();
    r.mover = mover;
    r.done = [done_promise](const Status& s) { done_promise->set_value(s); };
    c.change(&r);
    job.worker(0).Enqueue(std::move(r));
    Status s = Await(done);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.why << ": " << s.ToString();
    EXPECT_NE(s.message().find("DataMover"), std::string::npos) << s.message();
  }
  EXPECT_EQ(mover->counts().to_staging + mover->counts().to_elsewhere, 0);
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
  // Every node advertises one host: both servers share memory with all three workers, so after the
  // first round the rounds above went through it.
  EXPECT_EQ(SharedArenaMappings(), 2 + 3 * 2);
}

TEST(EngineTest, AFreshNameForEveryTensorIsWarnedAbout) {
  LocalJob job(1, 1);
  std::vector<float> value(1, 1.0f), out(1);
  ::testing::internal::CaptureStderr();
  std::vector<std::future<Status>> done;
  for (size_t i = 0; i < Engine::kManyNames; ++i) {
    done.push_back(PushPull(job.worker(0), "step " + std::to_string(i), DataType::kFloat32, {1}, value.data(),
                            out.data()));
  }
  for (auto& d : done) ASSERT_TRUE(Await(d).ok());
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("distinct tensor names"), std::string::npos) << log.substr(0, 2000);
}

}  // namespace
}  // namespace bps

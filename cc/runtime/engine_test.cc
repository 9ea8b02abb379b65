// Multi-rank tests of the whole worker/server/scheduler protocol: every node is a thread in this
// process, connected by the in-memory transport.
#include "cc/runtime/engine.h"
#include "cc/runtime/local_job_testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "cc/common/clock.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/reducer/test_data.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::LocalJob;

std::future<Status> PushPull(Engine& engine, const std::string& name, DataType dtype, std::vector<int64_t> shape,
                             const void* in, void* out, int priority = 0,
                             TensorScope scope = TensorScope::kProcess) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.input = in;
  r.output = out;
  r.priority = priority;
  r.scope = scope;
  r.done = [done](const Status& s) { done->set_value(s); };
  engine.Enqueue(std::move(r));
  return result;
}

// A request with everything a collective may set.
std::future<Status> Collective(Engine& engine, const std::string& name, DataType dtype, std::vector<int64_t> shape,
                               const void* in, void* out, ReduceOp op, std::vector<int32_t> members = {},
                               TensorScope scope = TensorScope::kProcess, int32_t root = 0) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.input = in;
  r.output = out;
  r.op = op;
  r.members = std::move(members);
  r.scope = scope;
  r.root = root;
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

using test_data::Value;

void Fill(DataType dtype, int w, uint64_t n, std::vector<char>* bytes) { *bytes = test_data::Fill(dtype, w, n); }

double Read(DataType dtype, const std::vector<char>& bytes, uint64_t i) {
  return test_data::Read(dtype, bytes.data() + i * DataTypeSize(dtype));
}

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

// Worker 0's round 2 times out (worker 1 is late), then worker 0 pushes round 3, which the server refuses.
// Worker 1's late round 2 must still get worker 0's round-2 data: the refused push may not land in memory
// the server is summing in (with shared memory, its buffer from the last reply had become the running sum).
TEST(EngineTest, APushAfterATimedOutRoundLeavesThatRoundsSumIntact) {
  LocalJob job(2, 1, /*timeout_s=*/1.5);
  std::vector<float> a(10, 1), b(10, 2), out0(10), out1(10);
  auto f0 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a.data(), out0.data());
  auto f1 = PushPull(job.worker(1), "t", DataType::kFloat32, {10}, b.data(), out1.data());
  ASSERT_TRUE(Await(f0).ok());
  ASSERT_TRUE(Await(f1).ok());
  std::vector<float> a2(10, 10), a3(10, 1000), b2(10, 100);
  auto round2 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a2.data(), out0.data());
  EXPECT_EQ(Await(round2, 20).code(), Code::kDeadlineExceeded);
  auto round3 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a3.data(), out0.data());
  EXPECT_FALSE(Await(round3, 20).ok());
  auto late = PushPull(job.worker(1), "t", DataType::kFloat32, {10}, b2.data(), out1.data());
  ASSERT_TRUE(Await(late, 20).ok());
  EXPECT_EQ(out1, std::vector<float>(10, 110));
}

// One process per GPU: local rank l of every machine pushes slice l of its machine's reduced tensor, and the
// servers sum one contribution per machine; tensors of every process still sum over all processes.
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
    // Either the worker's own connection or the scheduler's ABORT reports it first; both name the server
    // (servers are numbered in registration order, not by LocalJob's index).
    EXPECT_NE(s.message().find("server "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("exited"), std::string::npos) << s.message();
  }
  EXPECT_LT(NowSeconds() - start, 10.0);
}

}  // namespace
}  // namespace bps

// Pushes in place (ShareMode::kInPlace): with jemalloc as the process's malloc and bps_tf's router ahead of
// it (linked first, as bpslaunch preloads them), aligned blocks of 1 MiB and more (TensorFlow's memory) lie
// in the shareable heap, and a server on the host reads them and writes the sums where they are. Every
// worker and server of a LocalJob is on one host and in one process, so the servers map this process's heap.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cc/common/communication_counters.h"
#include "cc/common/shareable_heap.h"
#include "cc/reducer/test_data.h"
#include "cc/runtime/engine.h"
#include "cc/runtime/engine_testing.h"
#include "cc/runtime/local_job_testing.h"

namespace bps {
namespace {

using testing::Await;
using testing::LocalJob;
using test_data::Read;
using test_data::Value;

constexpr size_t kHeapBytes = ShareableHeap::kMinBytes;  // aligned blocks from here on come from the heap
constexpr size_t kCredit = 64 << 20;                         // the job's partitions are 4 KB: many in flight

// A block as TensorFlow's allocator takes one (posix_memalign), holding `bytes`.
std::shared_ptr<char> Aligned(const std::vector<char>& bytes) {
  void* block = nullptr;
  if (posix_memalign(&block, 64, bytes.size() + 1) != 0) std::abort();
  std::memcpy(block, bytes.data(), bytes.size());
  return std::shared_ptr<char>(static_cast<char*>(block), std::free);
}

// `may_go_in_place`: the request carries an InPlaceMark (a caller that keeps its memory, as the TF ops do).
std::future<Status> PushPull(Engine& engine, const std::string& name, DataType dtype, uint64_t n, const void* in,
                             void* out, bool may_go_in_place, ReduceOp op = ReduceOp::kSum) {
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = {static_cast<int64_t>(n)};
  r.input = in;
  r.output = out;
  r.op = op;
  if (may_go_in_place) r.in_place = std::make_shared<std::atomic<bool>>(false);
  return testing::Submit(engine, std::move(r));
}

uint64_t InPlaceBytes() { return CommunicationCounters::OfProcess().Totals().bytes_pushed_in_place; }

// Each worker's push_pull of `name` (n elements, rank w's values shifted by `shift`) with `kept[w]`; the
// outputs are the inputs where `same_buffer`. Returns false after reporting a wrong element.
void ExpectSums(LocalJob& job, const std::string& name, DataType dtype, uint64_t n, int shift,
                const std::vector<bool>& kept, bool same_buffer) {
  const int workers = job.workers();
  std::vector<std::shared_ptr<char>> in(workers), out(workers);
  std::vector<std::future<Status>> done;
  for (int w = 0; w < workers; ++w) {
    in[w] = Aligned(test_data::Fill(dtype, w + shift, n));
    out[w] = same_buffer ? in[w] : Aligned(std::vector<char>(n * DataTypeSize(dtype)));
    done.push_back(PushPull(job.worker(w), name, dtype, n, in[w].get(), out[w].get(), kept[w]));
  }
  for (int w = 0; w < workers; ++w) {
    Status s = Await(done[w]);
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
    const char* sum = out[w].get();
    for (uint64_t i = 0; i < n; ++i) {
      double expected = 0;
      for (int v = 0; v < workers; ++v) expected += Value(v + shift, i);
      ASSERT_EQ(Read(dtype, sum + i * DataTypeSize(dtype)), expected)
          << name << " shift " << shift << " element " << i << " worker " << w;
    }
  }
}

TEST(InPlaceTest, LargeTensorsAreSummedWhereTheyLie) {
  ASSERT_NE(ShareableHeap::Get(), nullptr);
  LocalJob job(2, 1, /*timeout_s=*/30, kCredit);
  // The first pushes to a server name the heap and are copied; its replies say it maps the heap.
  ExpectSums(job, "first", DataType::kFloat32, 1000, 0, {true, true}, false);
  const uint64_t before = InPlaceBytes();
  uint64_t bytes = 0;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kFloat64, DataType::kInt32}) {
    const uint64_t n = 4 * kHeapBytes / DataTypeSize(dtype) + 1001;  // the last partition is a part of one
    const std::string name = std::string("big ") + DataTypeName(dtype);
    for (int round = 0; round < 2; ++round) {
      ExpectSums(job, name, dtype, n, round * 5, {true, true}, /*same_buffer=*/round == 1);
      bytes += 2 * n * DataTypeSize(dtype);
    }
  }
  EXPECT_EQ(InPlaceBytes() - before, bytes) << "every push went in place";
}

TEST(InPlaceTest, PushesInPlaceAndCopiedOnesShareRounds) {
  ASSERT_NE(ShareableHeap::Get(), nullptr);
  LocalJob job(3, 2, /*timeout_s=*/30, kCredit);
  const uint64_t n = 2 * kHeapBytes / 4 + 3;
  const uint64_t before = InPlaceBytes();
  // Every mix: in place or copied, and in either order of arrival.
  const std::vector<std::vector<bool>> mixes = {{true, false, true}, {false, true, true}, {false, false, true},
                                                {true, true, false}, {true, true, true}};
  for (size_t i = 0; i < mixes.size(); ++i) {
    ExpectSums(job, "mixed", DataType::kFloat32, n, static_cast<int>(i), mixes[i], /*same_buffer=*/i % 2 == 1);
    ExpectSums(job, "mixed half", DataType::kFloat16, n, static_cast<int>(i), mixes[i], /*same_buffer=*/false);
  }
  EXPECT_GT(InPlaceBytes(), before);
}

TEST(InPlaceTest, OtherOpsAndSmallTensorsToo) {
  ASSERT_NE(ShareableHeap::Get(), nullptr);
  LocalJob job(2, 1, /*timeout_s=*/30, kCredit);
  const uint64_t n = 2 * kHeapBytes / 4;
  std::vector<std::vector<float>> values(2, std::vector<float>(n));
  for (uint64_t i = 0; i < n; ++i) {
    values[0][i] = static_cast<float>(i % 101);
    values[1][i] = static_cast<float>((i * 3) % 101);
  }
  std::vector<std::shared_ptr<char>> in(2), out(2);
  std::vector<std::future<Status>> done;
  for (int w = 0; w < 2; ++w) {
    const char* bytes = reinterpret_cast<const char*>(values[w].data());
    in[w] = Aligned(std::vector<char>(bytes, bytes + n * sizeof(float)));
    out[w] = Aligned(std::vector<char>(n * sizeof(float)));
    done.push_back(PushPull(job.worker(w), "max", DataType::kFloat32, n, in[w].get(), out[w].get(), true,
                            ReduceOp::kMax));
  }
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(Await(done[w]).ok());
    const float* got = reinterpret_cast<const float*>(out[w].get());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], std::max(values[0][i], values[1][i])) << i;
  }
  // Below the heap's size blocks are the allocator's ordinary ones, and pushes are copied, as before.
  const uint64_t before = InPlaceBytes();
  ExpectSums(job, "small", DataType::kFloat32, 100000, 0, {true, true}, false);
  EXPECT_EQ(InPlaceBytes(), before);
}

}  // namespace
}  // namespace bps

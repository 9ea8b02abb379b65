// Compressed push_pull through real workers, servers and a scheduler (threads over the in-memory
// transport), checked against the codec applied by hand: each worker's encoding, the server's sum of the
// decodings, the server's encoding of that sum, round after round with both sides' error feedback.
#include <gtest/gtest.h>

#include <future>
#include <random>

#include "cc/compress/codec.h"
#include "cc/runtime/engine.h"
#include "cc/runtime/local_job_testing.h"

namespace bps {
namespace {

using testing::LocalJob;

CompressionSpec Spec(const std::string& text) { return CompressionSpec::Parse(text).value(); }

std::future<Status> Compressed(Engine& engine, const std::string& name, const CompressionSpec& compression,
                               DataType dtype, uint64_t n, const void* in, void* out) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = {int64_t(n)};
  r.input = in;
  r.output = out;
  r.compression = compression;
  r.done = [done](const Status& s) { done->set_value(s); };
  engine.Enqueue(std::move(r));
  return result;
}

Status Await(std::future<Status>& f) {
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) return DeadlineExceeded("test gave up");
  return f.get();
}

// Integers, so that sums in any order are exact.
std::vector<float> Gradient(int worker, int round, uint64_t n) {
  std::mt19937 gen(worker * 1000 + round);
  std::uniform_int_distribution<int> value(-50, 50);
  std::vector<float> g(n);
  for (float& x : g) x = static_cast<float>(value(gen));
  return g;
}

// What every worker must receive, computed with the codec alone (one partition: n <= 1024 here).
class Reference {
 public:
  Reference(const CompressionSpec& spec, int workers, uint64_t n)
      : spec_(spec), n_(n), worker_carry_(workers, std::vector<float>(n, 0.f)), server_carry_(n, 0.f) {}

  std::vector<float> Round(int round) {
    std::vector<float> sum(n_, 0.f);
    std::vector<char> wire(EncodedBytes(spec_, n_));
    for (size_t w = 0; w < worker_carry_.size(); ++w) {
      std::vector<float>& carry = worker_carry_[w];
      if (!spec_.error_feedback) std::fill(carry.begin(), carry.end(), 0.f);
      std::vector<float> g = Gradient(static_cast<int>(w), round, n_);
      for (uint64_t i = 0; i < n_; ++i) carry[i] += g[i];
      Encode(spec_, carry.data(), n_, 0, wire.data(), spec_.error_feedback);
      EXPECT_TRUE(DecodeAdd(spec_, wire.data(), wire.size(), n_, 0, sum.data()).ok());
    }
    if (spec_.error_feedback) {
      for (uint64_t i = 0; i < n_; ++i) sum[i] += server_carry_[i];
    }
    Encode(spec_, sum.data(), n_, 0, wire.data(), spec_.error_feedback);
    if (spec_.error_feedback) server_carry_ = sum;
    std::vector<float> out(n_);
    EXPECT_TRUE(Decode(spec_, wire.data(), wire.size(), n_, 0, out.data()).ok());
    return out;
  }

 private:
  CompressionSpec spec_;
  uint64_t n_;
  std::vector<std::vector<float>> worker_carry_;
  std::vector<float> server_carry_;
};

class CompressionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CompressionTest, EveryWorkerGetsTheReferenceRoundAfterRound) {
  const CompressionSpec spec = Spec(GetParam());
  for (uint64_t n : {1u, 7u, 333u, 1024u}) {
    const int workers = 3;
    LocalJob job(workers, 1);
    Reference reference(spec, workers, n);
    for (int round = 1; round <= 4; ++round) {
      std::vector<std::vector<float>> in(workers), out(workers, std::vector<float>(n, -1.f));
      std::vector<std::future<Status>> done;
      for (int w = 0; w < workers; ++w) {
        in[w] = Gradient(w, round, n);
        done.push_back(Compressed(job.worker(w), "g", spec, DataType::kFloat32, n, in[w].data(), out[w].data()));
      }
      std::vector<float> expected = reference.Round(round);
      for (int w = 0; w < workers; ++w) {
        Status s = Await(done[w]);
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (uint64_t i = 0; i < n; ++i) {
          ASSERT_NEAR(out[w][i], expected[i], 1e-4 * (1 + std::fabs(expected[i])))
              << GetParam() << " n=" << n << " round " << round << " worker " << w << " element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressionTest,
                         ::testing::Values("onebit", "topk:0.1", "topk:0.5,ef=0", "onebit,ef=0"));

TEST(CompressionJobTest, RandomKSumsTheChosenElementsExactlyAcrossPartitions) {
  const CompressionSpec spec = Spec("randomk:0.1,ef=0");  // (with feedback, later rounds add leftovers)
  const int workers = 3;
  const uint64_t n = 10000;  // ten partitions, on two servers
  LocalJob job(workers, 2);
  for (int round = 1; round <= 3; ++round) {
    std::vector<std::vector<float>> in(workers), out(workers, std::vector<float>(n, -1.f));
    std::vector<float> sum(n, 0.f);
    std::vector<std::future<Status>> done;
    for (int w = 0; w < workers; ++w) {
      in[w] = Gradient(w, round, n);
      for (float& x : in[w]) x = x >= 0 ? x + 1 : x;  // no zeros: a zero in the output means "not chosen"
      for (uint64_t i = 0; i < n; ++i) sum[i] += in[w][i];
      done.push_back(Compressed(job.worker(w), "r", spec,
                                DataType::kFloat32, n, in[w].data(), out[w].data()));
    }
    for (int w = 0; w < workers; ++w) ASSERT_TRUE(Await(done[w]).ok());
    uint64_t chosen = 0;
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[0][i], out[1][i]);
      ASSERT_EQ(out[0][i], out[2][i]);
      if (out[0][i] != 0.f) {
        ASSERT_EQ(out[0][i], sum[i]) << "element " << i;
        ++chosen;
      }
    }
    // Elements whose sum is zero look unchosen; the rest is k per partition.
    EXPECT_GE(chosen, n / 10 - 40);
    EXPECT_LE(chosen, n / 10);
  }
}

std::future<Status> MoveState(Engine& engine, PushPullRequest::Kind kind, std::shared_ptr<CompressionState> state) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  engine.Enqueue(PushPullRequest::ForState(kind, state->spec, state, [done](const Status& s) { done->set_value(s); }));
  return result;
}

// Rounds [first, last] of "g" on every worker of `job`; returns worker 0's outputs, one per round.
std::vector<std::vector<float>> Train(LocalJob& job, const CompressionSpec& spec, uint64_t n, int first, int last) {
  std::vector<std::vector<float>> outputs;
  for (int round = first; round <= last; ++round) {
    std::vector<std::vector<float>> in(job.workers()), out(job.workers(), std::vector<float>(n));
    std::vector<std::future<Status>> done;
    for (int w = 0; w < job.workers(); ++w) {
      in[w] = Gradient(w, round, n);
      done.push_back(Compressed(job.worker(w), "g", spec, DataType::kFloat32, n, in[w].data(), out[w].data()));
    }
    for (auto& f : done) EXPECT_TRUE(Await(f).ok());
    outputs.push_back(out[0]);
  }
  return outputs;
}

// A job stopped after 3 rounds and resumed from the saved states (workers' momentum and feedback, the
// servers' feedback) in a new job gives what an uninterrupted job gives, bit for bit. (Two workers: a sum
// of two floats is the same in either order of arrival, so both jobs' sums are exactly equal.)
TEST_P(CompressionTest, SavedStateResumesAsIfNeverStopped) {
  CompressionSpec spec = Spec(GetParam() + ",momentum=0.9");
  const uint64_t n = 5000;  // five partitions on two servers
  const int workers = 2;
  std::vector<std::vector<float>> uninterrupted;
  {
    LocalJob job(workers, 2);
    uninterrupted = Train(job, spec, n, 1, 6);
  }
  std::vector<std::shared_ptr<CompressionState>> saved;
  {
    LocalJob job(workers, 2);
    Train(job, spec, n, 1, 3);
    for (int w = 0; w < workers; ++w) {
      saved.push_back(std::make_shared<CompressionState>());
      ASSERT_EQ(job.worker(w).CompressedTensors().size(), 1u);
      saved.back()->spec = job.worker(w).CompressedTensors()[0];
      auto f = MoveState(job.worker(w), PushPullRequest::Kind::kSaveState, saved.back());
      Status s = Await(f);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  LocalJob job(workers, 2);
  std::vector<std::future<Status>> loading;  // (the first request of a name declares it: on every worker at once)
  for (int w = 0; w < workers; ++w) {
    // Through the bytes a checkpoint file holds.
    auto decoded = CompressionState::Decode(saved[w]->Encode());
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded.value().server_residual.empty(), w != 0 || !spec.error_feedback);
    loading.push_back(MoveState(job.worker(w), PushPullRequest::Kind::kLoadState,
                                std::make_shared<CompressionState>(decoded.value())));
  }
  for (auto& f : loading) {
    Status s = Await(f);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<std::vector<float>> resumed = Train(job, spec, n, 4, 6);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(resumed[r], uninterrupted[3 + r]) << GetParam() << " round " << 4 + r;
}

TEST(CompressionStateTest, DamagedOrMismatchedStatesAreRefused) {
  TensorSpec spec;
  spec.name = "g";
  spec.shape = {10};
  spec.compression = Spec("onebit,momentum=0.9");
  std::string good = CompressionState::Empty(spec, true).Encode();
  ASSERT_TRUE(CompressionState::Decode(good).ok());
  EXPECT_FALSE(CompressionState::Decode(good.substr(0, good.size() - 1)).ok());
  EXPECT_FALSE(CompressionState::Decode("garbage").ok());
  CompressionState short_momentum = CompressionState::Empty(spec, false);
  short_momentum.momentum.pop_back();
  auto refused = CompressionState::Decode(short_momentum.Encode());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("does not fit"), std::string::npos);
}

TEST(CompressionJobTest, CompressingWhatIsNotAFloatSumFailsOnEveryWorker) {
  LocalJob job(2, 1);
  std::vector<int64_t> a(4), b(4);
  auto fa = Compressed(job.worker(0), "ints", Spec("onebit"), DataType::kInt64, 4, a.data(), a.data());
  auto fb = Compressed(job.worker(1), "ints", Spec("onebit"), DataType::kInt64, 4, b.data(), b.data());
  for (auto* f : {&fa, &fb}) {
    Status s = Await(*f);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("float32 sums only"), std::string::npos) << s.message();
  }
}

TEST(CompressionJobTest, WorkersWhoDisagreeOnCompressionFail) {
  LocalJob job(2, 1);
  std::vector<float> a(8), b(8);
  auto fa = Compressed(job.worker(0), "g", Spec("onebit"), DataType::kFloat32, 8, a.data(), a.data());
  auto fb = Compressed(job.worker(1), "g", Spec("topk:0.5"), DataType::kFloat32, 8, b.data(), b.data());
  EXPECT_EQ(Await(fa).code(), Code::kInvalidArgument);
  EXPECT_EQ(Await(fb).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace bps

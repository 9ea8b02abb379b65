// The processes of one machine, played by threads: every rank must see the same order of tokens.
#include "cc/cuda/local_coordinator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "cc/common/clock.h"

namespace bps {
namespace cuda {
namespace {

std::string UniqueName(const std::string& test) {
  return "test/" + test + "/" + std::to_string(getpid()) + "/" + std::to_string(NowSeconds());
}

// Connects ranks 1..n-1 while rank 0 listens (in any order: members wait for the root).
std::vector<std::unique_ptr<LocalCoordinator>> ConnectAll(const std::string& name, int n, double timeout_s) {
  std::vector<std::future<StatusOr<std::unique_ptr<LocalCoordinator>>>> connecting;
  for (int r = n - 1; r >= 0; --r) {
    connecting.push_back(std::async(std::launch::async, [=] { return LocalCoordinator::Connect(name, r, n, timeout_s); }));
  }
  std::vector<std::unique_ptr<LocalCoordinator>> ranks(n);
  for (int i = 0; i < n; ++i) {
    auto c = connecting[i].get();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) ranks[n - 1 - i] = std::move(c.value());
  }
  return ranks;
}

struct Log {
  std::mutex mu;
  std::vector<std::string> tokens;
  std::vector<std::string> payloads;
  std::vector<Status> errors;
  std::promise<void> all;
  size_t expected = 0;

  LocalCoordinator::Run Record(const std::string& token) {
    return [this, token](const StatusOr<std::string>& payload) {
      std::lock_guard<std::mutex> lock(mu);
      tokens.push_back(token);
      payloads.push_back(payload.ok() ? payload.value() : "");
      errors.push_back(payload.status());
      if (tokens.size() == expected) all.set_value();
    };
  }
  bool Wait(double seconds) {
    return all.get_future().wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  }
};

TEST(LocalCoordinatorTest, EveryRankRunsTokensInTheSameOrder) {
  const int n = 4, tokens = 60;
  auto ranks = ConnectAll(UniqueName("order"), n, 20);
  std::vector<Log> logs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    logs[r].expected = tokens;
    threads.emplace_back([&, r] {
      std::vector<int> order(tokens);
      for (int i = 0; i < tokens; ++i) order[i] = i;
      std::mt19937 rng(r);
      std::shuffle(order.begin(), order.end(), rng);  // every rank readies the tokens in its own order
      for (int i : order) {
        std::string token = "t" + std::to_string(i);
        ranks[r]->Order(token, r == 0 ? "id-" + token : "ignored", logs[r].Record(token));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(logs[r].Wait(20)) << "rank " << r;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(logs[r].tokens, logs[0].tokens) << "rank " << r;
    for (int i = 0; i < tokens; ++i) {
      ASSERT_TRUE(logs[r].errors[i].ok()) << logs[r].errors[i].ToString();
      EXPECT_EQ(logs[r].payloads[i], "id-" + logs[r].tokens[i]);
    }
  }
}

TEST(LocalCoordinatorTest, TheKthOrderOfATokenMatchesTheOthersKth) {
  const int n = 3, repeats = 5;
  auto ranks = ConnectAll(UniqueName("repeat"), n, 20);
  std::vector<Log> logs(n);
  for (int r = 0; r < n; ++r) logs[r].expected = repeats;
  for (int k = 0; k < repeats; ++k) {
    for (int r = n - 1; r >= 0; --r) ranks[r]->Order("grad", "round" + std::to_string(k), logs[r].Record("grad"));
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(logs[r].Wait(20));
    for (int k = 0; k < repeats; ++k) EXPECT_EQ(logs[r].payloads[k], "round" + std::to_string(k));
  }
}

TEST(LocalCoordinatorTest, ATokenOneRankNeverOrdersFailsNamingIt) {
  const int n = 3;
  auto ranks = ConnectAll(UniqueName("missing"), n, /*timeout_s=*/1.0);
  std::vector<Log> logs(2);
  const double start = NowSeconds();
  for (int r = 0; r < 2; ++r) {
    logs[r].expected = 1;
    ranks[r]->Order("lonely", "", logs[r].Record("lonely"));
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(logs[r].Wait(10));
    EXPECT_EQ(logs[r].errors[0].code(), Code::kDeadlineExceeded) << logs[r].errors[0].ToString();
    EXPECT_NE(logs[r].errors[0].message().find("not on local rank(s) 2"), std::string::npos)
        << logs[r].errors[0].message();
  }
  EXPECT_LT(NowSeconds() - start, 5.0);
  // The machine keeps working for tokens everyone orders.
  std::vector<Log> after(n);
  for (int r = 0; r < n; ++r) {
    after[r].expected = 1;
    ranks[r]->Order("together", "x", after[r].Record("together"));
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(after[r].Wait(10));
    EXPECT_TRUE(after[r].errors[0].ok());
  }
}

TEST(LocalCoordinatorTest, ALostProcessFailsTheOthersPromptly) {
  const int n = 3;
  auto ranks = ConnectAll(UniqueName("lost"), n, 30);
  std::vector<Log> logs(n);
  for (int r : {0, 2}) {
    logs[r].expected = 1;
    ranks[r]->Order("waits for rank 1", "", logs[r].Record("t"));
  }
  const double start = NowSeconds();
  ranks[1].reset();  // rank 1's process goes away
  for (int r : {0, 2}) {
    ASSERT_TRUE(logs[r].Wait(10)) << "rank " << r;
    EXPECT_EQ(logs[r].errors[0].code(), Code::kUnavailable) << logs[r].errors[0].ToString();
  }
  EXPECT_LT(NowSeconds() - start, 5.0);
  Log later;
  later.expected = 1;
  ranks[2]->Order("after", "", later.Record("after"));
  ASSERT_TRUE(later.Wait(10));
  EXPECT_FALSE(later.errors[0].ok());
}

TEST(LocalCoordinatorTest, AMemberWithoutRankZeroGivesUp) {
  const double start = NowSeconds();
  auto member = LocalCoordinator::Connect(UniqueName("no root"), 1, 2, /*timeout_s=*/0.5);
  EXPECT_EQ(member.status().code(), Code::kDeadlineExceeded) << member.status().ToString();
  EXPECT_LT(NowSeconds() - start, 5.0);
}

TEST(LocalCoordinatorTest, TwoRootsForOneMachineAreRefused) {
  const std::string name = UniqueName("two roots");
  auto first = LocalCoordinator::Connect(name, 0, 2, 5);
  ASSERT_TRUE(first.ok());
  auto second = LocalCoordinator::Connect(name, 0, 2, 5);
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  EXPECT_NE(second.status().message().find("DMLC_WORKER_ID"), std::string::npos);
}

}  // namespace
}  // namespace cuda
}  // namespace bps

#include "cc/runtime/started_requests.h"

#include <gtest/gtest.h>

#include <thread>

namespace bps {
namespace {

void NoAbort(const std::string& why) { FAIL() << "unexpected abort: " << why; }

TEST(StartedRequestsTest, FinishReturnsTheStatusTheEngineGave) {
  StartedRequests table;
  auto done = table.Start("a", 10);
  done(Unavailable("worker 1 was lost"));
  Status status = table.Finish("a", NoAbort);
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_EQ(status.message(), "worker 1 was lost");
  EXPECT_EQ(table.pending(), 0u);
}

TEST(StartedRequestsTest, FinishWaitsForACompletionFromAnotherThread) {
  StartedRequests table;
  auto done = table.Start("a", 10);
  std::thread engine([done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done(Status::OK());
  });
  EXPECT_TRUE(table.Finish("a", NoAbort).ok());
  engine.join();
}

TEST(StartedRequestsTest, StartsOfOneNamePairWithFinishesInOrder) {
  StartedRequests table;
  auto first = table.Start("a", 10);
  auto second = table.Start("a", 10);
  auto other = table.Start("b", 10);
  second(Internal("second"));
  first(Internal("first"));
  other(Status::OK());
  EXPECT_EQ(table.Finish("a", NoAbort).message(), "first");
  EXPECT_TRUE(table.Finish("b", NoAbort).ok());
  EXPECT_EQ(table.Finish("a", NoAbort).message(), "second");
  EXPECT_EQ(table.pending(), 0u);
}

TEST(StartedRequestsTest, ADoneWithoutAStartIsAnError) {
  StartedRequests table;
  Status status = table.Finish("never-started", NoAbort);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_NE(status.message().find("without a start"), std::string::npos);
}

TEST(StartedRequestsTest, AMissingCompletionAbortsThenWaitsForTheEngine) {
  StartedRequests table;
  auto done = table.Start("a", 0.05);  // Finish gives up waiting quietly after 0.1 s
  std::string reason;
  std::thread engine;
  Status status = table.Finish("a", [&](const std::string& why) {
    reason = why;
    // The abort makes the engine fail its requests: the completion follows.
    engine = std::thread([done] { done(Aborted("the job was aborted")); });
  });
  engine.join();
  EXPECT_EQ(status.code(), Code::kAborted);
  EXPECT_NE(reason.find("push_pull 'a'"), std::string::npos);
}

}  // namespace
}  // namespace bps

#include "cc/ps/request_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cc/common/clock.h"

namespace bps {
namespace {

// A request whose answers are recorded in `answers`.
Request Recorded(std::shared_ptr<std::vector<Status>> answers, PeerId peer = 1) {
  Request r;
  r.peer = peer;
  r.done = [answers](const Status& s) { answers->push_back(s); };
  return r;
}

TEST(RequestTableTest, TakeReturnsTheRequestOnceAndOnlyForItsPeer) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  const uint64_t id = table.Track(Recorded(answers, /*peer=*/3));
  ASSERT_NE(id, 0u);
  EXPECT_FALSE(table.Take(id, /*from=*/4)) << "a reply from another peer is not taken";
  auto taken = table.Take(id, 3);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->peer, 3);
  EXPECT_FALSE(table.Take(id, 3)) << "a request is answered once";
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(answers->empty()) << "taking leaves the answer to the caller";
}

TEST(RequestTableTest, FailedJobRefusesNewRequestsAtOnce) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  EXPECT_TRUE(table.SetFailure(Unavailable("lost the scheduler")));
  EXPECT_FALSE(table.SetFailure(Aborted("later"))) << "the first failure is the job's";
  EXPECT_EQ(table.Track(Recorded(answers)), 0u);
  ASSERT_EQ(answers->size(), 1u);
  EXPECT_EQ((*answers)[0].code(), Code::kUnavailable);
  EXPECT_EQ(table.refusal().message(), "lost the scheduler");
}

TEST(RequestTableTest, BrokenGenerationRefusesUntilTheNextStarts) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  EXPECT_TRUE(table.SetGenerationFailure(Aborted("a worker was lost")));
  EXPECT_EQ(table.Track(Recorded(answers)), 0u);
  EXPECT_TRUE(table.failure().ok()) << "the job goes on";
  table.StartGeneration();
  EXPECT_NE(table.Track(Recorded(answers)), 0u);
  EXPECT_EQ(answers->size(), 1u);
}

TEST(RequestTableTest, FailAllDefersRequestsTheTransportStillUses) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  Request sending = Recorded(answers, /*peer=*/1);
  sending.sending = true;
  const uint64_t busy = table.Track(std::move(sending));
  table.Track(Recorded(answers, /*peer=*/1));
  table.FailAll(Aborted("generation broke"));
  EXPECT_EQ(answers->size(), 1u) << "the idle request fails at once";
  EXPECT_EQ(table.size(), 1u);
  table.Sent(busy);
  ASSERT_EQ(answers->size(), 2u) << "the busy one once its payload has left";
  EXPECT_EQ((*answers)[1].code(), Code::kAborted);
  EXPECT_EQ(table.size(), 0u);
}

TEST(RequestTableTest, LostPeerFailsItsRequestsEvenWhileInUse) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  Request to_lost = Recorded(answers, /*peer=*/7);
  to_lost.sending = true;
  Request to_other = Recorded(answers, /*peer=*/8);
  to_other.sending = true;
  table.Track(std::move(to_lost));
  table.Track(std::move(to_other));
  table.FailAll(Unavailable("lost server 0"), /*lost=*/7);
  EXPECT_EQ(answers->size(), 1u) << "a connection that is gone carries nothing";
  EXPECT_EQ(table.size(), 1u);
}

TEST(RequestTableTest, APeerThatClosesFailsItsOwnRequestsOnly) {
  // An elastic job's server of an earlier generation may close while the next one runs.
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  table.Track(Recorded(answers, /*peer=*/7));
  const uint64_t current = table.Track(Recorded(answers, /*peer=*/8));
  table.FailPeer(Unavailable("lost a server of the last generation"), /*lost=*/7);
  ASSERT_EQ(answers->size(), 1u);
  EXPECT_EQ((*answers)[0].code(), Code::kUnavailable);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(table.Take(current, 8)) << "the request to a server of this generation goes on";
}

TEST(RequestTableTest, ReceiveIntoChecksPeerAndLengthAndHoldsTheRequest) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  std::vector<char> buffer(16);
  Request r = Recorded(answers, /*peer=*/2);
  r.destination = buffer.data();
  r.bytes = buffer.size();
  const uint64_t id = table.Track(std::move(r));
  EXPECT_EQ(table.ReceiveInto(id, /*from=*/3, 16), nullptr);
  EXPECT_EQ(table.ReceiveInto(id, 2, 8), nullptr);
  EXPECT_EQ(table.ReceiveInto(id, 2, 16), buffer.data());
  table.FailAll(Aborted("job aborted"));
  EXPECT_TRUE(answers->empty()) << "the transport is still writing into the caller's buffer";
  auto taken = table.Take(id, 2);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->deferred.code(), Code::kAborted) << "the reply's taker answers with the deferred failure";
}

TEST(RequestTableTest, FailExpiredAnswersOnlyOldRequests) {
  RequestTable table;
  auto answers = std::make_shared<std::vector<Status>>();
  Request r = Recorded(answers);
  r.round = 3;
  table.Track(std::move(r));
  auto why = [](const Request& r) {
    return DeadlineExceeded("timed out waiting for the sum of round " + std::to_string(r.round));
  };
  table.FailExpired(NowSeconds(), /*limit_s=*/60, why);
  EXPECT_TRUE(answers->empty());
  table.FailExpired(NowSeconds() + 61, 60, why);
  ASSERT_EQ(answers->size(), 1u);
  EXPECT_EQ((*answers)[0].message(), "timed out waiting for the sum of round 3");
}

TEST(RequestTableTest, DeclarationGetsItsAnswerAsAPlanStatus) {
  RequestTable table;
  Status answered;
  Request r;
  r.declare_done = [&answered](const StatusOr<PartitionPlan>& plan) { answered = plan.status(); };
  table.Track(std::move(r));
  table.FailAll(Unavailable("lost the scheduler"));
  EXPECT_EQ(answered.code(), Code::kUnavailable);
}

}  // namespace
}  // namespace bps

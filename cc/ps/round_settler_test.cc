#include "cc/ps/round_settler.h"

#include <gtest/gtest.h>

#include <cstring>

#include "cc/ps/inbox_testing.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::Inbox;

constexpr uint64_t kKey = 7;

// A settler on a server's transport and one worker connected to it; the worker's inbox gets the replies.
class RoundSettlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    network_ = std::make_shared<InMemoryNetwork>();
    server_ = CreateInMemoryTransport(network_);
    server_->SetHandler(&server_inbox_);
    auto address = server_->Listen("server", 1);
    ASSERT_TRUE(address.ok());
    worker_ = CreateInMemoryTransport(network_);
    worker_->SetHandler(&worker_inbox_);
    auto to_server = worker_->Connect(address.value(), 5, Link::kData);
    ASSERT_TRUE(to_server.ok());
    Message hello;
    hello.type = MessageType::kIdentify;
    worker_->Send(to_server.value(), hello.Encode(), nullptr, 0, nullptr);
    auto arrived = server_inbox_.Next(MessageType::kIdentify);
    ASSERT_TRUE(arrived);
    worker_peer_ = arrived->first;
    config_.timeout_s = 5;
    settler_ = std::make_unique<RoundSettler>(
        config_, server_.get(),
        RoundSettler::Contributors{[this](const KeySpec&) { return finished_; },
                                   [this](const KeySpec&) { return joined_; }},
        [] { return std::string("arena"); });
    entry_.spec = KeySpec{kKey, DataType::kFloat32, 2, 2, TensorScope::kProcess};
    entry_.round = std::make_unique<KeyRound>(DataType::kFloat32, 2, 2);
  }

  void TearDown() override {
    worker_->Shutdown(1);
    server_->Shutdown(1);
  }

  // Contribution `rank` pushes `values` to round 1 and parks its pull.
  void Push(int rank, std::vector<float> values) {
    std::memcpy(entry_.round->ReceiveBuffer(rank), values.data(), values.size() * sizeof(float));
    ASSERT_TRUE(entry_.round->Add(rank, 1).ok());
    Park(rank);
  }
  void Park(int rank) {
    entry_.parked.push_back(ParkedPull{worker_peer_, rank, ShareMode::kNone, 100u + rank, 1, 0});
  }

  Config config_;
  std::shared_ptr<InMemoryNetwork> network_;
  std::unique_ptr<Transport> server_, worker_;
  Inbox server_inbox_, worker_inbox_;
  PeerId worker_peer_ = -1;
  std::set<int> finished_, joined_;
  ServerKey entry_;
  std::unique_ptr<RoundSettler> settler_;
};

TEST_F(RoundSettlerTest, ACompletedRoundAnswersEveryParkedPullWithTheSum) {
  Push(0, {1, 2});
  settler_->Settle(kKey, &entry_);
  EXPECT_FALSE(worker_inbox_.Next(MessageType::kPullReply, 0.2)) << "the round waits for contribution 1";
  Push(1, {10, 20});
  settler_->Settle(kKey, &entry_);
  for (int i = 0; i < 2; ++i) {
    auto reply = worker_inbox_.Next(MessageType::kPullReply);
    ASSERT_TRUE(reply);
    EXPECT_TRUE(reply->second.status().ok()) << reply->second.status().ToString();
    EXPECT_EQ(reply->second.round, 1u);
    std::vector<char> payload = worker_inbox_.LastPayload();
    ASSERT_EQ(payload.size(), 2 * sizeof(float));
    const float* sum = reinterpret_cast<const float*>(payload.data());
    EXPECT_EQ(sum[0], 11);
    EXPECT_EQ(sum[1], 22);
  }
  EXPECT_TRUE(entry_.parked.empty());
}

TEST_F(RoundSettlerTest, AJoinedContributorIsCountedAbsent) {
  joined_ = {1};
  Push(0, {1, 2});
  settler_->Settle(kKey, &entry_);
  auto reply = worker_inbox_.Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->second.status().ok());
  EXPECT_TRUE(reply->second.echo) << "the sum is contribution 0's own push";
  EXPECT_EQ(entry_.round->completed_round(), 1u);
}

TEST_F(RoundSettlerTest, ARoundWaitingOnAFinishedContributorFailsNamingIt) {
  finished_ = {1};
  Push(0, {1, 2});
  settler_->Settle(kKey, &entry_);
  auto reply = worker_inbox_.Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(reply->second.text.find("worker(s) 1 finished"), std::string::npos) << reply->second.text;
  EXPECT_TRUE(entry_.parked.empty());
}

TEST_F(RoundSettlerTest, AStaleRoundFailsNamingWhoDidNotPush) {
  Push(0, {1, 2});
  const double started = entry_.round->round_started_at();
  settler_->FailIfStale(kKey, &entry_, started + 1);
  EXPECT_FALSE(worker_inbox_.Next(MessageType::kPullReply, 0.2)) << "within BYTEPS_TIMEOUT";
  settler_->FailIfStale(kKey, &entry_, started + 6);
  auto reply = worker_inbox_.Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(reply->second.text.find("worker(s) 1 did not push round 1"), std::string::npos) << reply->second.text;
}

TEST_F(RoundSettlerTest, APullOfAnOlderRoundIsAnError) {
  Push(0, {1, 2});
  Push(1, {1, 2});
  settler_->Settle(kKey, &entry_);
  ASSERT_TRUE(worker_inbox_.Next(MessageType::kPullReply));
  ASSERT_TRUE(worker_inbox_.Next(MessageType::kPullReply));
  ParkedPull old{worker_peer_, 0, ShareMode::kNone, 5, /*round=*/0, 0};
  settler_->Answer(kKey, &entry_, old);
  auto reply = worker_inbox_.Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kFailedPrecondition);
}

// Backup workers: three workers, one backup, a window of one round.
class BackupSettlerTest : public RoundSettlerTest {
 protected:
  void SetUp() override {
    RoundSettlerTest::SetUp();
    entry_.spec = KeySpec{kKey, DataType::kFloat32, 2, 3, TensorScope::kProcess};
    entry_.spec.backups = 1;
    entry_.round = std::make_unique<KeyRound>(DataType::kFloat32, 2, 3, nullptr, ReduceOp::kSum, CompressionSpec{},
                                              kKey, nullptr, 1, 1);
  }
  // Contribution `rank` pushes `values` to `round`, as the server does (SumPush).
  void PushRound(int rank, uint32_t round, std::vector<float> values) {
    std::memcpy(entry_.round->ReceiveBuffer(rank), values.data(), values.size() * sizeof(float));
    const uint64_t dropped = entry_.round->dropped_pushes();
    ASSERT_TRUE(entry_.round->Add(rank, round).ok());
    entry_.parked.push_back(ParkedPull{worker_peer_, rank, ShareMode::kNone, 100u + rank, round, 0});
    entry_.parked.back().late = entry_.round->dropped_pushes() > dropped;
    settler_->Settle(kKey, &entry_);
  }
  std::vector<float> NextSum(bool* late) {
    auto reply = worker_inbox_.Next(MessageType::kPullReply);
    EXPECT_TRUE(reply);
    if (!reply) return {};
    EXPECT_TRUE(reply->second.status().ok()) << reply->second.status().ToString();
    *late = reply->second.late;
    std::vector<char> payload = worker_inbox_.LastPayload();
    const float* sum = reinterpret_cast<const float*>(payload.data());
    return std::vector<float>(sum, sum + payload.size() / sizeof(float));
  }
};

TEST_F(BackupSettlerTest, ALatePushIsAnsweredWithTheSameSumTheContributorsGot) {
  PushRound(0, 1, {1, 2});
  PushRound(1, 1, {10, 20});
  bool late = true;
  const std::vector<float> first = NextSum(&late);
  EXPECT_FALSE(late);
  EXPECT_EQ(NextSum(&late), first);
  const float scale = 3.f / 2.f;
  EXPECT_EQ(first, std::vector<float>({11 * scale, 22 * scale}));
  PushRound(2, 1, {500, 500});
  EXPECT_EQ(NextSum(&late), first) << "the late worker gets round 1's sum, its push dropped";
  EXPECT_TRUE(late);
  EXPECT_TRUE(entry_.parked.empty());
}

TEST_F(BackupSettlerTest, ARoundHeldForAWorkerBehindTheWindowFailsAfterTheTimeoutNamingIt) {
  PushRound(0, 1, {1, 1});
  PushRound(1, 1, {1, 1});
  bool late = false;
  NextSum(&late);
  NextSum(&late);
  PushRound(0, 2, {1, 1});
  PushRound(1, 2, {1, 1});
  EXPECT_FALSE(worker_inbox_.Next(MessageType::kPullReply, 0.2)) << "worker 2 has not pushed round 1";
  const double started = entry_.round->round_started_at();
  settler_->FailIfStale(kKey, &entry_, started + 6);
  auto reply = worker_inbox_.Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(reply->second.text.find("worker(s) 2 stayed more than BYTEPS_BACKUP_WINDOW=1 rounds behind"),
            std::string::npos)
      << reply->second.text;
}

TEST_F(BackupSettlerTest, ARoundFailsOnlyWhenFinishedWorkersLeaveTooFewToComplete) {
  finished_ = {2};
  PushRound(0, 1, {1, 1});
  EXPECT_FALSE(worker_inbox_.Next(MessageType::kPullReply, 0.2)) << "worker 1 can still complete the round";
  finished_ = {1, 2};
  settler_->Settle(kKey, &entry_);
  auto reply = worker_inbox_.Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace bps

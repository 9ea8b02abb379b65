// The scheduler's protocol for servers in an elastic job: a lost server breaks the generation, every worker
// going on with the servers left; a server that comes later waits and is taken in at the next generation;
// the last server lost fails the job.
#include <gtest/gtest.h>

#include "cc/ps/scheduler.h"
#include "cc/ps/scheduler_testing.h"

namespace bps {
namespace {

using testing::Contains;
using testing::ElasticSchedulerTest;
using testing::Node;

class ElasticServersTest : public ElasticSchedulerTest {
 protected:
  // Two servers (server 0 at hosta:1, server 1 at hostc:9), two workers, the job started.
  void StartTwoServerJob() {
    StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/2);
    server_ = &Register(Role::kServer, 0, "hosta:1");
    second_ = &Register(Role::kServer, 0, "hostc:9");
    worker_[1] = &Register(Role::kWorker, 1, "hostb:2");
    worker_[0] = &Register(Role::kWorker, 0, "hosta:3");
    for (Node* server : {server_, second_}) {
      auto book = server->Book();
      ASSERT_TRUE(book.ok()) << book.status().ToString();
      server->Send(MessageType::kServerReady);
    }
    for (int w = 0; w < 2; ++w) worker_book_[w] = WorkerBook(*worker_[w]);
    ASSERT_EQ(worker_book_[0].servers, (std::vector<std::string>{"hosta:1", "hostc:9"}));
  }

  // Server 1 dies; both workers hear their generation broke, naming it, and ask for the next one, which
  // server 0 alone serves.
  void LoseSecondServer() {
    second_->transport->Shutdown(0);
    for (int w = 0; w < 2; ++w) {
      Status broken = worker_[w]->Outcome(MessageType::kGenerationBroken);
      EXPECT_EQ(broken.code(), Code::kAborted) << broken.ToString();
      EXPECT_TRUE(Contains(broken, "server 1 (hostc:9) exited or lost its connection")) << broken.ToString();
    }
    for (int w = 0; w < 2; ++w) worker_[w]->Send(MessageType::kNextGeneration);
  }

  Node* second_ = nullptr;
};

TEST_F(ElasticServersTest, ALostServerBreaksTheGenerationAndEveryWorkerGoesOnWithTheServersLeft) {
  StartTwoServerJob();
  LoseSecondServer();
  EXPECT_FALSE(server_->Gets(MessageType::kAbort, 0.2)) << "the job goes on";
  AddressBook server_book = ResetAndReady(/*dropped=*/true);
  EXPECT_EQ(server_book.generation, 2);
  EXPECT_EQ(server_book.servers, std::vector<std::string>{"hosta:1"});
  EXPECT_EQ(server_book.your_rank, 0);
  EXPECT_EQ(server_book.num_workers, 2) << "no worker was lost";
  for (int w = 0; w < 2; ++w) {
    AddressBook book = WorkerBook(*worker_[w]);
    EXPECT_EQ(book.servers, std::vector<std::string>{"hosta:1"});
    EXPECT_EQ(book.your_rank, w) << "every worker keeps its place";
  }
  // Tensors are planned over the servers left: all of a large one on server 0.
  Declare(0, Spec({20000}));
  Declare(1, Spec({20000}));
  ConfirmKeyPlan();
  auto declared = worker_[0]->inbox.Next(MessageType::kDeclareReply);
  ASSERT_TRUE(declared);
  auto partitions = PartitionPlan::Decode(declared->second.text);
  ASSERT_TRUE(partitions.ok()) << partitions.status().ToString();
  ASSERT_GT(partitions.value().partitions.size(), 1u);
  for (const Partition& p : partitions.value().partitions) EXPECT_EQ(p.server, 0);
}

TEST_F(ElasticServersTest, AWorkerThatHeardOfTheLossFirstIsReadyOnceTheSchedulerHearsOfIt) {
  StartTwoServerJob();
  // Worker 0's own connection to server 1 broke first: it asks for the next generation at once.
  worker_[0]->Send(MessageType::kNextGeneration);
  LoseSecondServer();
  ResetAndReady(/*dropped=*/true);
  EXPECT_EQ(WorkerBook(*worker_[0]).generation, 2);
  EXPECT_EQ(WorkerBook(*worker_[1]).generation, 2);
}

TEST_F(ElasticServersTest, ARestartedServerWaitsAndIsTakenInAtTheNextGeneration) {
  StartTwoServerJob();
  LoseSecondServer();
  ResetAndReady(/*dropped=*/true);
  for (int w = 0; w < 2; ++w) WorkerBook(*worker_[w]);
  Node& restarted = Register(Role::kServer, 0, "hostc:10");
  EXPECT_TRUE(restarted.Gets(MessageType::kJoinPending));
  for (int w = 0; w < 2; ++w) {
    auto waiting = worker_[w]->inbox.Next(MessageType::kWorkersWaiting);
    ASSERT_TRUE(waiting);
    EXPECT_EQ(waiting->second.sender, 1) << "a waiting server ends a generation as a waiting worker does";
  }
  Status third = Register(Role::kServer, 0, "hostd:11").Book().status();
  EXPECT_TRUE(Contains(third, "every place in the job is taken")) << third.ToString();

  for (int w = 0; w < 2; ++w) worker_[w]->Send(MessageType::kFinish);
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  server_->Send(MessageType::kResetReply);
  for (int w = 0; w < 2; ++w) ASSERT_TRUE(worker_[w]->Gets(MessageType::kGenerationDone));
  for (int w = 0; w < 2; ++w) worker_[w]->Send(MessageType::kNextGeneration);
  for (Node* server : {server_, &restarted}) {
    auto book = server->Book();
    ASSERT_TRUE(book.ok()) << book.status().ToString();
    EXPECT_EQ(book.value().servers, (std::vector<std::string>{"hosta:1", "hostc:10"}));
    EXPECT_EQ(book.value().generation, 3);
    server->Send(MessageType::kServerReady);
  }
  EXPECT_EQ(WorkerBook(*worker_[0]).servers, (std::vector<std::string>{"hosta:1", "hostc:10"}));
}

TEST_F(ElasticServersTest, TheLastServerLostFailsTheJobSayingSo) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  server_->transport->Shutdown(0);
  Status s = worker_[0]->Outcome(MessageType::kAbort);
  EXPECT_TRUE(Contains(s, "server 0 (hosta:1) exited or lost its connection")) << s.ToString();
  EXPECT_TRUE(Contains(s, "It was the job's last server")) << s.ToString();
  EXPECT_FALSE(Result().ok());
}

TEST_F(ElasticServersTest, AServerLostWhileTheGenerationStartsLeavesItToTheOthers) {
  StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/2);
  server_ = &Register(Role::kServer, 0, "hosta:1");
  second_ = &Register(Role::kServer, 0, "hostc:9");
  worker_[1] = &Register(Role::kWorker, 1, "hostb:2");
  worker_[0] = &Register(Role::kWorker, 0, "hosta:3");
  ASSERT_TRUE(server_->Book().ok());
  ASSERT_TRUE(second_->Book().ok());
  second_->transport->Shutdown(0);  // before it said it was ready: no worker has a book yet
  auto book = server_->inbox.Next(MessageType::kAddressBook);
  ASSERT_TRUE(book);
  auto decoded = AddressBook::Decode(book->second.text);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded.value().servers, std::vector<std::string>{"hosta:1"});
  server_->Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(*worker_[0]).servers, std::vector<std::string>{"hosta:1"});
}

}  // namespace
}  // namespace bps

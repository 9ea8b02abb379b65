// A scheduler started in the place of a lost one rebuilds an elastic job from the members that register again
// saying where they were.
#include <gtest/gtest.h>

#include "cc/ps/scheduler_testing.h"

namespace bps {
namespace testing {
namespace {

class SchedulerRecoveryTest : public ElasticSchedulerTest {
 protected:
  // A member of generation `generation` (of `workers` workers and `servers` servers) registers again.
  Node& Rejoin(Role role, int worker_id, int rank, const std::string& address, int generation = 4, int workers = 2,
               int servers = 2) {
    Node& node = Connect(address);
    RegisterBody b;
    b.role = static_cast<int32_t>(role);
    b.worker_id = worker_id;
    b.num_worker = 2;
    b.num_server = config_.num_server;
    b.min_workers = config_.min_workers;
    b.max_workers = config_.max_workers;
    b.address = address;
    b.last_generation = generation;
    b.last_rank = rank;
    b.generation_workers = workers;
    b.generation_servers = servers;
    node.Send(MessageType::kRegister, b.Encode());
    return node;
  }
};

TEST_F(SchedulerRecoveryTest, EveryMemberBackStartsTheNextGenerationRankedAsBefore) {
  StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/2);
  // Registered in another order than they were ranked; worker id and rank differ (an elastic job renumbers).
  Node& second_server = Rejoin(Role::kServer, 0, 1, "hostb:1");
  Node& rank1 = Rejoin(Role::kWorker, 0, 1, "hosta:3");
  Node& first_server = Rejoin(Role::kServer, 0, 0, "hosta:1");
  EXPECT_FALSE(first_server.Gets(MessageType::kAddressBook, 0.3)) << "a worker of the generation is missing";
  Node& rank0 = Rejoin(Role::kWorker, 2, 0, "hostc:4");
  auto server_book = first_server.Book();
  ASSERT_TRUE(server_book.ok()) << server_book.status().ToString();
  EXPECT_EQ(server_book.value().your_rank, 0);
  EXPECT_EQ(server_book.value().generation, 5);
  EXPECT_EQ(server_book.value().servers, (std::vector<std::string>{"hosta:1", "hostb:1"}));
  auto other_book = second_server.Book();
  ASSERT_TRUE(other_book.ok());
  EXPECT_EQ(other_book.value().your_rank, 1);
  EXPECT_FALSE(rank0.Gets(MessageType::kAddressBook, 0.3)) << "workers wait for every server to be ready";
  first_server.Send(MessageType::kServerReady);
  second_server.Send(MessageType::kServerReady);
  AddressBook book0 = WorkerBook(rank0), book1 = WorkerBook(rank1);
  EXPECT_EQ(book0.your_rank, 0);
  EXPECT_EQ(book1.your_rank, 1);
  EXPECT_EQ(book0.num_workers, 2);
  EXPECT_EQ(book0.generation, 5);
  EXPECT_NE(book0.your_token, book1.your_token);
  EXPECT_EQ(server_book.value().worker_tokens, (std::vector<std::string>{book0.your_token, book1.your_token}));
}

TEST_F(SchedulerRecoveryTest, AProcessRegisteringFreshMeanwhileRanksAfterTheMembersThatCameBack) {
  StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/1);
  Node& fresh = Register(Role::kWorker, 1, "hostd:5");  // before the scheduler knows it recovers a job
  Node& server = Rejoin(Role::kServer, 0, 0, "hosta:1", 2, 1, 1);
  Node& member = Rejoin(Role::kWorker, 0, 0, "hosta:3", 2, 1, 1);
  auto book = server.Book();
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  server.Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(member).your_rank, 0) << "the member holds the state the others take";
  AddressBook fresh_book = WorkerBook(fresh);
  EXPECT_EQ(fresh_book.your_rank, 1);
  EXPECT_EQ(fresh_book.num_workers, 2);
  EXPECT_EQ(fresh_book.generation, 3);
}

TEST_F(SchedulerRecoveryTest, AfterTheTimeoutTheJobGoesOnWithWhoCameBack) {
  StartScheduler(/*timeout_s=*/1, ElasticLimits{1, 3}, 600, /*num_server=*/2);
  Node& server = Rejoin(Role::kServer, 0, 0, "hosta:1");
  Node& worker = Rejoin(Role::kWorker, 0, 0, "hosta:3");
  auto book = server.Book(10);
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  EXPECT_EQ(book.value().servers.size(), 1u);
  server.Send(MessageType::kServerReady);
  AddressBook worker_book = WorkerBook(worker);
  EXPECT_EQ(worker_book.num_workers, 1);
  EXPECT_EQ(worker_book.generation, 5);
}

TEST_F(SchedulerRecoveryTest, TooFewBackWithinTheTimeoutFailsTheJobSayingWhoIsMissing) {
  StartScheduler(/*timeout_s=*/1, ElasticLimits{2, 3}, 600, /*num_server=*/2);
  Node& server = Rejoin(Role::kServer, 0, 0, "hosta:1");
  Rejoin(Role::kWorker, 0, 0, "hosta:3");
  Status abort = server.Outcome(MessageType::kAbort, 10);
  EXPECT_TRUE(Contains(abort, "found only 1 of its 2 workers (1 of them in it before) and 1 of its 2 servers of generation 4")) << abort.ToString();
  EXPECT_TRUE(Contains(Result(), "BYTEPS_MIN_WORKERS"));
}

TEST_F(SchedulerRecoveryTest, AWorkerStartedAgainFreshCountsButAMemberMustBeBack) {
  // The scheduler's machine ran worker 0 too: it comes back fresh, with the scheduler.
  StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/1);
  Node& fresh = Register(Role::kWorker, 0, "hosta:3");
  Node& server = Rejoin(Role::kServer, 0, 0, "hostc:1", 3, 2, 1);
  EXPECT_FALSE(server.Gets(MessageType::kAddressBook, 0.3)) << "no worker that was in the job is back yet";
  Node& member = Rejoin(Role::kWorker, 1, 1, "hostb:3", 3, 2, 1);
  ASSERT_TRUE(server.Book().ok());
  server.Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(member).your_rank, 0) << "the worker that holds the state ranks first";
  EXPECT_EQ(WorkerBook(fresh).your_rank, 1);
}

TEST_F(SchedulerRecoveryTest, ARegistrationThatDoesNotFitIsTurnedAwayAndTheJobWaitsForTheOthers) {
  StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/1);
  Node& liar = Rejoin(Role::kWorker, 0, /*rank=*/7, "hosta:3", 4, 2, 1);
  auto refused = liar.Book();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status(), "does not fit the job")) << refused.status().ToString();
  Node& server = Rejoin(Role::kServer, 0, 0, "hosta:1", 4, 1, 1);
  Node& worker = Rejoin(Role::kWorker, 1, 0, "hostb:3", 4, 1, 1);
  ASSERT_TRUE(server.Book().ok());
  server.Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(worker).your_rank, 0);
}

TEST_F(SchedulerRecoveryTest, ARegistrationTurnedAwayChangesNothingTheJobWaitsFor) {
  StartScheduler(20, ElasticLimits{1, 3}, 600, /*num_server=*/1);
  Node& worker = Rejoin(Role::kWorker, 0, 0, "hosta:3", 4, 1, 1);
  // The same worker id again, naming a later generation of more workers: turned away, it counts for nothing.
  Node& twin = Rejoin(Role::kWorker, 0, 1, "hostb:3", 9, 3, 1);
  auto refused = twin.Book();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status(), "two workers registered with DMLC_WORKER_ID=0")) << refused.status().ToString();
  Node& server = Rejoin(Role::kServer, 0, 0, "hosta:1", 4, 1, 1);
  auto book = server.Book();
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  EXPECT_EQ(book.value().generation, 5);
  server.Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(worker).num_workers, 1);
}

TEST_F(SchedulerRecoveryTest, AJobThatIsNotElasticRefusesAMemberRegisteringAgain) {
  StartScheduler(/*timeout_s=*/2);  // the job never starts: it ends at its start timeout
  Node& node = Rejoin(Role::kWorker, 0, 0, "hosta:3", 4, 2, 1);
  auto refused = node.Book();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status(), "this job is not elastic")) << refused.status().ToString();
}

TEST_F(SchedulerRecoveryTest, ARunningSchedulerTakesAMemberRegisteringAgainAsALateOne) {
  // A worker cut off from a scheduler that still runs registers again: it waits for the next generation.
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  Node& back = Rejoin(Role::kWorker, 2, 0, "hostc:4", 1, 2, 1);
  EXPECT_TRUE(back.Gets(MessageType::kJoinPending));
  for (int w = 0; w < 2; ++w) {
    auto waiting = worker_[w]->inbox.Next(MessageType::kWorkersWaiting);
    ASSERT_TRUE(waiting);
    EXPECT_EQ(waiting->second.sender, 1);
  }
}

}  // namespace
}  // namespace testing
}  // namespace bps

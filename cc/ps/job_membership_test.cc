// Who may join a job and what a member's comings and goings mean, without any transport.
#include "cc/ps/job_membership.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

using Part = JobMembership::Part;
using Departure = JobMembership::Departure;
using Formation = JobMembership::Formation;

RegisterBody Worker(int worker_id, int local_rank = 0, int local_size = 1, int num_worker = 2, int num_server = 1) {
  RegisterBody b;
  b.role = static_cast<int32_t>(Role::kWorker);
  b.worker_id = worker_id;
  b.local_rank = local_rank;
  b.local_size = local_size;
  b.num_worker = num_worker;
  b.num_server = num_server;
  b.address = "machine" + std::to_string(worker_id) + ":" + std::to_string(100 + local_rank);
  return b;
}

RegisterBody Server(int index, int num_worker = 2, int num_server = 1) {
  RegisterBody b = Worker(0, 0, 1, num_worker, num_server);
  b.role = static_cast<int32_t>(Role::kServer);
  b.address = "server" + std::to_string(index) + ":1";
  return b;
}

// Peer ids as a transport hands them out: in connection order, unrelated to ranks.
constexpr PeerId kServer = 10, kWorker0 = 20, kWorker1 = 21;

class JobMembershipTest : public ::testing::Test {
 protected:
  // Two worker machines of one process and a server, all registered and started.
  void StartJob() {
    ASSERT_TRUE(members_.Admit(kWorker1, Worker(1), "worker").ok());
    ASSERT_TRUE(members_.Admit(kServer, Server(0), "server").ok());
    ASSERT_FALSE(members_.complete());
    ASSERT_TRUE(members_.Admit(kWorker0, Worker(0), "worker").ok());
    ASSERT_TRUE(members_.complete());
    members_.Start();
  }

  JobMembership members_{2, 1};
};

TEST_F(JobMembershipTest, RanksComeFromIdsAndServersRankInRegistrationOrder) {
  JobMembership members(2, 2);
  ASSERT_TRUE(members.Admit(7, Server(0, 2, 2), "server").ok());
  ASSERT_TRUE(members.Admit(3, Server(1, 2, 2), "server").ok());
  ASSERT_TRUE(members.Admit(5, Worker(1, 1, 2, 2, 2), "worker").ok());
  ASSERT_TRUE(members.Admit(4, Worker(0, 0, 2, 2, 2), "worker").ok());
  EXPECT_EQ(members.Find(5)->rank, 3);  // worker_id * local_size + local_rank
  EXPECT_EQ(members.Find(4)->rank, 0);
  EXPECT_EQ(members.local_size(), 2);
  EXPECT_EQ(members.worker_processes(), 4);
  EXPECT_FALSE(members.complete()) << "ranks 1 and 2 are missing";
  EXPECT_EQ(members.Find(7)->rank, -1) << "a server's rank is given when the job starts";
  ASSERT_TRUE(members.Admit(6, Worker(0, 1, 2, 2, 2), "worker").ok());
  ASSERT_TRUE(members.Admit(8, Worker(1, 0, 2, 2, 2), "worker").ok());
  ASSERT_TRUE(members.complete());
  members.Start();
  EXPECT_EQ(members.servers(), (std::vector<PeerId>{7, 3}));
  EXPECT_EQ(members.Find(7)->rank, 0);
  EXPECT_EQ(members.Find(3)->rank, 1);
  std::map<int, PeerId> by_rank{{0, 4}, {1, 6}, {2, 8}, {3, 5}};
  EXPECT_EQ(members.workers(), by_rank);
  EXPECT_EQ(members.All(), (std::vector<PeerId>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(members.Find(99), nullptr);
}

TEST_F(JobMembershipTest, EveryWorkerGetsATokenOfItsOwn) {
  StartJob();
  const std::string& a = members_.Find(kWorker0)->token;
  const std::string& b = members_.Find(kWorker1)->token;
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(members_.Find(kServer)->token.empty());
}

TEST_F(JobMembershipTest, ASecondWorkerWithTheSameIdIsTurnedAwayAndTheFirstKeepsItsPlace) {
  ASSERT_TRUE(members_.Admit(kWorker0, Worker(1), "worker at machine1:100").ok());
  RegisterBody again = Worker(1);
  again.address = "elsewhere:5";
  Status twice = members_.Admit(kWorker1, again, "worker at elsewhere:5");
  EXPECT_EQ(twice.code(), Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("DMLC_WORKER_ID=1"), std::string::npos) << twice.message();
  EXPECT_NE(twice.message().find("machine1:100 first, then elsewhere:5"), std::string::npos) << twice.message();
  EXPECT_EQ(members_.Find(kWorker1), nullptr);
  EXPECT_EQ(members_.workers().at(1), kWorker0);
}

TEST_F(JobMembershipTest, RegistrationsThatDoNotFitTheJobChangeNothing) {
  struct Case {
    const char* what;
    RegisterBody body;
    Code code;
    const char* says;
  };
  RegisterBody scheduler = Worker(0);
  scheduler.role = static_cast<int32_t>(Role::kScheduler);
  std::vector<Case> cases = {
      {"another job's size", Worker(0, 0, 1, 3), Code::kInvalidArgument, "DMLC_NUM_WORKER=3"},
      {"another job's servers", Worker(0, 0, 1, 2, 4), Code::kInvalidArgument, "DMLC_NUM_SERVER=4"},
      {"an id beyond the job", Worker(2), Code::kInvalidArgument, "outside the job's ranges"},
      {"a negative id", Worker(-1), Code::kInvalidArgument, "outside the job's ranges"},
      {"a local rank beyond the local size", Worker(0, 2, 2), Code::kInvalidArgument, "BYTEPS_LOCAL_RANK=2"},
      {"a local size of zero", Worker(0, 0, 0), Code::kInvalidArgument, "BYTEPS_LOCAL_SIZE=0"},
      {"a scheduler", scheduler, Code::kInvalidArgument, "DMLC_ROLE=scheduler"},
  };
  for (const Case& c : cases) {
    Status admitted = members_.Admit(kWorker0, c.body, "them");
    EXPECT_EQ(admitted.code(), c.code) << c.what;
    EXPECT_NE(admitted.message().find(c.says), std::string::npos) << c.what << ": " << admitted.message();
    EXPECT_EQ(members_.Find(kWorker0), nullptr) << c.what;
  }
  EXPECT_TRUE(members_.Admit(kWorker0, Worker(0), "worker").ok()) << "the place is still free";
}

TEST_F(JobMembershipTest, LocalSizesMustAgreeAndServersAreCounted) {
  ASSERT_TRUE(members_.Admit(kWorker0, Worker(0, 0, 2), "worker").ok());
  Status other = members_.Admit(kWorker1, Worker(1, 0, 1), "worker");
  EXPECT_NE(other.message().find("BYTEPS_LOCAL_SIZE=1 but another worker has 2"), std::string::npos)
      << other.message();
  ASSERT_TRUE(members_.Admit(kServer, Server(0), "server").ok());
  Status extra = members_.Admit(kServer + 1, Server(1), "server at server1:1");
  EXPECT_NE(extra.message().find("more servers registered than DMLC_NUM_SERVER=1"), std::string::npos)
      << extra.message();
}

TEST_F(JobMembershipTest, NobodyIsAdmittedOnceTheJobStarted) {
  StartJob();
  Status late = members_.Admit(99, Worker(0), "worker");
  EXPECT_EQ(late.code(), Code::kFailedPrecondition);
  EXPECT_NE(late.message().find("after the job started"), std::string::npos) << late.message();
  Status stranger = members_.Admit(99, Worker(0, 0, 1, 5), "worker");
  EXPECT_NE(stranger.message().find("DMLC_NUM_WORKER=5"), std::string::npos)
      << "another job's process hears about its size first: " << stranger.message();
}

TEST_F(JobMembershipTest, AGenerationEndsWhenEveryWorkerThatStayedFinished) {
  StartJob();
  EXPECT_EQ(members_.generation(), 1);
  EXPECT_FALSE(members_.GenerationFinished());
  EXPECT_TRUE(members_.Finish(kWorker1, false));
  EXPECT_FALSE(members_.Finish(kWorker1, false)) << "finishing twice is one finish";
  EXPECT_FALSE(members_.GenerationFinished());
  EXPECT_EQ(members_.FinishedWorkers(), (std::set<int>{1}));
  EXPECT_TRUE(members_.Finish(kWorker0, true));
  EXPECT_EQ(members_.last_finished(), 0);
  EXPECT_EQ(members_.JoinedWorkers(), (std::set<int>{0}));
  EXPECT_TRUE(members_.GenerationFinished());

  std::vector<PeerId> told = members_.NextGeneration();
  EXPECT_EQ(told, (std::vector<PeerId>{kWorker0, kWorker1}));
  EXPECT_EQ(members_.generation(), 2);
  EXPECT_EQ(members_.Find(kWorker0)->part, Part::kIdle);
  EXPECT_FALSE(members_.Find(kWorker0)->joined) << "join() lasts one generation";
  EXPECT_TRUE(members_.FinishedWorkers().empty());
  EXPECT_FALSE(members_.GenerationFinished()) << "idle workers have not finished the new generation";
  members_.Activate(kWorker0);
  EXPECT_EQ(members_.Find(kWorker0)->part, Part::kActive);
}

TEST_F(JobMembershipTest, OnlyWorkersThatAreDoneMayLeave) {
  StartJob();
  EXPECT_EQ(members_.Leave(kServer), Departure::kFailure);
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kFailure) << "it was working";
  EXPECT_EQ(members_.Find(kWorker0)->part, Part::kActive) << "a failure changes nothing here";
  EXPECT_EQ(members_.Leave(99), Departure::kFailure);

  ASSERT_TRUE(members_.Finish(kWorker0, false));
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kFinished);
  EXPECT_EQ(members_.FinishedWorkers(), (std::set<int>{0})) << "a worker that left pushes nothing more";
  EXPECT_FALSE(members_.AllLeft());
  EXPECT_FALSE(members_.GenerationFinished()) << "worker 1 is still at work";
  ASSERT_TRUE(members_.Finish(kWorker1, false));
  EXPECT_TRUE(members_.GenerationFinished());

  EXPECT_EQ(members_.NextGeneration(), (std::vector<PeerId>{kWorker1})) << "who left is not told";
  EXPECT_EQ(members_.Leave(kWorker1), Departure::kIdle);
  EXPECT_TRUE(members_.AllLeft());
  EXPECT_FALSE(members_.GenerationFinished()) << "nobody finished the generation nobody started";
}

// An elastic job of 2 first workers, 1 to 3 of them, and a server.
class ElasticMembershipTest : public ::testing::Test {
 protected:
  static RegisterBody ElasticWorker(int worker_id) {
    RegisterBody b = Worker(worker_id);
    b.min_workers = 1;
    b.max_workers = 3;
    return b;
  }
  void StartJob() {
    RegisterBody server = Server(0);
    server.min_workers = 1;
    server.max_workers = 3;
    ASSERT_TRUE(members_.Admit(kServer, server, "server").ok());
    ASSERT_TRUE(members_.Admit(kWorker1, ElasticWorker(1), "worker").ok());
    ASSERT_FALSE(members_.complete());
    ASSERT_TRUE(members_.Admit(kWorker0, ElasticWorker(0), "worker").ok());
    ASSERT_TRUE(members_.complete());
    members_.Start();
  }
  std::map<int, PeerId> Ranks() const { return members_.workers(); }

  JobMembership members_{2, 1, ElasticLimits{1, 3}};
};

TEST_F(ElasticMembershipTest, TheFirstGenerationRanksByIdAndOthersWaitForTheNext) {
  StartJob();
  EXPECT_EQ(Ranks(), (std::map<int, PeerId>{{0, kWorker0}, {1, kWorker1}}));
  EXPECT_EQ(members_.worker_processes(), 2);
  const std::string token = members_.Find(kWorker0)->token;
  EXPECT_EQ(token.size(), 32u);

  Status twin = members_.Admit(30, ElasticWorker(1), "worker");
  EXPECT_NE(twin.message().find("two workers registered with DMLC_WORKER_ID=1"), std::string::npos) << twin.message();
  ASSERT_TRUE(members_.Admit(31, ElasticWorker(2), "worker").ok()) << "a place beyond the first workers";
  EXPECT_EQ(members_.Find(31)->part, Part::kWaiting);
  EXPECT_EQ(members_.Waiting(), (std::vector<PeerId>{31}));
  Status full = members_.Admit(32, ElasticWorker(0), "worker at x:1");
  EXPECT_NE(full.message().find("two workers"), std::string::npos) << full.message();
  RegisterBody fixed = ElasticWorker(2);
  fixed.max_workers = 0;
  EXPECT_NE(members_.Admit(33, fixed, "worker").message().find("BYTEPS_MAX_WORKERS=0"), std::string::npos);
  EXPECT_EQ(members_.worker_processes(), 2) << "a waiting worker is not in the running generation";

  // Every worker finishes; the next generation takes them and the waiting one, the newcomer ranked last.
  ASSERT_TRUE(members_.Finish(kWorker0, false));
  ASSERT_TRUE(members_.Finish(kWorker1, false));
  members_.NextGeneration();
  EXPECT_EQ(members_.NextFormation(), Formation::kAwaitingWorkers);
  EXPECT_TRUE(members_.Ready(kWorker1));
  EXPECT_FALSE(members_.Ready(31)) << "a waiting worker is ready already";
  EXPECT_EQ(members_.NextFormation(), Formation::kAwaitingWorkers);
  EXPECT_TRUE(members_.Ready(kWorker0));
  EXPECT_EQ(members_.NextFormation(), Formation::kForms);
  members_.Form();
  EXPECT_EQ(members_.generation(), 2);
  EXPECT_EQ(Ranks(), (std::map<int, PeerId>{{0, kWorker0}, {1, kWorker1}, {2, 31}}));
  EXPECT_NE(members_.Find(kWorker0)->token, token) << "every generation has fresh tokens";
  EXPECT_TRUE(members_.Waiting().empty());
  Status beyond = members_.Admit(34, [] {
    RegisterBody b = ElasticWorker(2);
    b.worker_id = 1;
    return b;
  }(), "worker");
  EXPECT_NE(beyond.message().find("two workers"), std::string::npos);
}

TEST_F(ElasticMembershipTest, ALostWorkerBreaksTheGenerationAndTheOthersRankFirstInTheNext) {
  StartJob();
  ASSERT_TRUE(members_.Admit(31, ElasticWorker(2), "worker").ok());
  ASSERT_TRUE(members_.Finish(kWorker1, false)) << "one worker finished before the loss";
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kFailure) << "it was working: the scheduler breaks";
  std::vector<PeerId> others = members_.Break(kWorker0);
  EXPECT_EQ(others, (std::vector<PeerId>{kWorker1}));
  EXPECT_EQ(members_.Find(kWorker0)->part, Part::kLeft);
  EXPECT_EQ(members_.Find(kWorker1)->part, Part::kIdle) << "what it finished broke with the generation";
  EXPECT_FALSE(members_.Finish(kWorker1, false)) << "it does not work in a generation now";
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kHarmless) << "its connection closing later changes nothing";

  // Its place is free again: a restarted worker 0 waits, as the newcomer does.
  ASSERT_TRUE(members_.Admit(40, ElasticWorker(0), "worker").ok());
  EXPECT_EQ(members_.Leave(31), Departure::kHarmless) << "a waiting worker may go";
  EXPECT_TRUE(members_.Ready(kWorker1));
  members_.Form();
  EXPECT_EQ(Ranks(), (std::map<int, PeerId>{{0, kWorker1}})) << "the survivor holds the state: rank 0";
  EXPECT_EQ(members_.generation(), 2);
  EXPECT_EQ(members_.Waiting(), (std::vector<PeerId>{40})) << "registered after the loss: it waits for the next";

  // The survivor's next commit ends its generation; the next one takes the restarted worker, ranked after it.
  ASSERT_TRUE(members_.Finish(kWorker1, false));
  members_.NextGeneration();
  EXPECT_TRUE(members_.Ready(kWorker1));
  members_.Form();
  EXPECT_EQ(Ranks(), (std::map<int, PeerId>{{0, kWorker1}, {1, 40}}));
}

TEST_F(ElasticMembershipTest, WorkersWaitingBeforeALossJoinTheSurvivorsThoseRegisteredAfterWait) {
  StartJob();
  ASSERT_TRUE(members_.Admit(31, ElasticWorker(2), "worker").ok()) << "waits for the next commit";
  members_.Break(kWorker0);
  ASSERT_TRUE(members_.Admit(40, ElasticWorker(0), "worker").ok()) << "worker 0 restarted after the loss";
  // The survivor is slow to ask for the next generation: the restarted worker registered before it did.
  EXPECT_EQ(members_.NextFormation(), Formation::kAwaitingWorkers);
  ASSERT_TRUE(members_.Ready(kWorker1));
  EXPECT_EQ(members_.NextFormation(), Formation::kForms);
  members_.Form();
  EXPECT_EQ(Ranks(), (std::map<int, PeerId>{{0, kWorker1}, {1, 31}}));
  EXPECT_EQ(members_.Waiting(), (std::vector<PeerId>{40}));
  EXPECT_EQ(members_.Find(40)->part, Part::kWaiting);
}

TEST_F(ElasticMembershipTest, TheNextGenerationNeedsTheMinimumAndAWorkerOfTheLast) {
  JobMembership members(2, 1, ElasticLimits{2, 3});
  auto body = [](int id) {
    RegisterBody b = Worker(id);
    b.min_workers = 2;
    b.max_workers = 3;
    return b;
  };
  RegisterBody server = Server(0);
  server.min_workers = 2;
  server.max_workers = 3;
  ASSERT_TRUE(members.Admit(kServer, server, "server").ok());
  ASSERT_TRUE(members.Admit(kWorker0, body(0), "worker").ok());
  ASSERT_TRUE(members.Admit(kWorker1, body(1), "worker").ok());
  members.Start();
  members.Break(kWorker1);
  ASSERT_TRUE(members.Ready(kWorker0));
  EXPECT_EQ(members.NextFormation(), Formation::kBelowMinimum);
  EXPECT_EQ(members.Candidates(), 1);
  ASSERT_TRUE(members.Admit(50, body(1), "worker").ok());
  ASSERT_TRUE(members.Admit(52, body(2), "worker").ok());
  EXPECT_EQ(members.NextFormation(), Formation::kForms);
  members.Form();
  EXPECT_EQ(members.worker_processes(), 2) << "registered after the loss: only as many as the minimum needs";
  EXPECT_EQ(members.Waiting(), (std::vector<PeerId>{52}));
  EXPECT_EQ(members.Leave(52), Departure::kHarmless);

  // Only newcomers would be left: the job is over, failed (no worker of the last generation finished).
  ASSERT_TRUE(members.Admit(51, body(2), "worker").ok());
  members.Break(kWorker0);
  EXPECT_EQ(members.Leave(50), Departure::kLost) << "a survivor that leaves without finishing is lost";
  EXPECT_EQ(members.NextFormation(), Formation::kLost);
  EXPECT_EQ(members.DismissWaiting(), (std::vector<PeerId>{51}));
}

TEST_F(ElasticMembershipTest, TheJobEndsWellWhenAWorkerOfTheLastGenerationFinished) {
  StartJob();
  ASSERT_TRUE(members_.Finish(kWorker0, false)) << "one worker finished before the other was lost";
  members_.Break(kWorker1);
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kIdle);
  EXPECT_EQ(members_.NextFormation(), Formation::kOver);
}

TEST_F(ElasticMembershipTest, WhatAWorkerFinishedInAnEarlierGenerationDoesNotCount) {
  StartJob();
  ASSERT_TRUE(members_.Finish(kWorker0, false));
  ASSERT_TRUE(members_.Finish(kWorker1, false));
  members_.NextGeneration();
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kIdle) << "it finished, then left";
  ASSERT_TRUE(members_.Ready(kWorker1)) << "it goes on alone";
  members_.Form();
  members_.Break(kWorker1);
  EXPECT_EQ(members_.NextFormation(), Formation::kLost);
}

TEST_F(ElasticMembershipTest, WorkersThatFailBetweenGenerationsAreLost) {
  StartJob();
  ASSERT_TRUE(members_.Admit(31, ElasticWorker(2), "worker").ok());
  members_.Break(kWorker1);  // worker 0 survives, then fails before it asks for the next generation
  EXPECT_TRUE(members_.Fail(kWorker0));
  EXPECT_EQ(members_.Find(kWorker0)->part, Part::kLeft) << "it is out of the next generation at once";
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kHarmless) << "its connection closing later changes nothing";
  EXPECT_EQ(members_.NextFormation(), Formation::kLost) << "the waiting worker holds no state of the job";
  EXPECT_FALSE(members_.Fail(31)) << "nothing depended on a waiting worker";
}

TEST_F(ElasticMembershipTest, AWorkerThatFailsAfterItFinishedEndsNothingWell) {
  StartJob();
  ASSERT_TRUE(members_.Finish(kWorker0, false));
  ASSERT_TRUE(members_.Finish(kWorker1, false));
  EXPECT_TRUE(members_.Fail(kWorker1));
  EXPECT_EQ(members_.Find(kWorker1)->part, Part::kFinished) << "the generation it finished ends as before";
  EXPECT_TRUE(members_.GenerationFinished());
  members_.NextGeneration();
  EXPECT_EQ(members_.Leave(kWorker1), Departure::kLost);
  EXPECT_EQ(members_.Leave(kWorker0), Departure::kIdle);
  EXPECT_EQ(members_.NextFormation(), Formation::kOver) << "worker 0 finished";
}

}  // namespace
}  // namespace bps

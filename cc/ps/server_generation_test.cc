#include "cc/ps/server_generation.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

AddressBook Book(int generation, int workers, int local_size = 1) {
  AddressBook book;
  book.generation = generation;
  book.num_workers = workers;
  book.local_size = local_size;
  for (int w = 0; w < workers; ++w) book.worker_tokens.push_back("token" + std::to_string(generation * 10 + w));
  return book;
}

KeySpec Spec(TensorScope scope = TensorScope::kProcess, std::vector<int32_t> members = {}) {
  KeySpec spec;
  spec.scope = scope;
  spec.members = std::move(members);
  return spec;
}

TEST(ServerGenerationTest, AConnectionSpeaksForTheRankWhoseTokenItShows) {
  ServerGeneration g;
  EXPECT_TRUE(g.Start(Book(1, 2)));
  EXPECT_FALSE(g.RankOf(5));
  EXPECT_TRUE(g.Identify(/*from=*/5, /*rank=*/1, "token11").ok());
  EXPECT_EQ(g.RankOf(5), 1);
  EXPECT_EQ(g.Identify(6, 0, "token11").code(), Code::kUnauthenticated) << "worker 1's token is not worker 0's";
  EXPECT_EQ(g.Identify(6, 7, "token11").code(), Code::kUnauthenticated) << "no such worker";
  EXPECT_EQ(g.Identify(5, 0, "token10").code(), Code::kFailedPrecondition) << "one rank per connection";
  EXPECT_EQ(g.Identify(6, 1, "token11").code(), Code::kFailedPrecondition) << "one connection per rank";
}

TEST(ServerGenerationTest, ALostConnectionFreesItsRank) {
  ServerGeneration g;
  g.Start(Book(1, 2));
  ASSERT_TRUE(g.Identify(5, 0, "token10").ok());
  g.Forget(5);
  EXPECT_FALSE(g.RankOf(5));
  EXPECT_TRUE(g.Identify(6, 0, "token10").ok());
}

TEST(ServerGenerationTest, ANewBookAsksEveryWorkerToIdentifyAnew) {
  ServerGeneration g;
  g.Start(Book(1, 2));
  ASSERT_TRUE(g.Identify(5, 0, "token10").ok());
  EXPECT_FALSE(g.Start(Book(2, 3))) << "not the first book";
  EXPECT_FALSE(g.RankOf(5));
  EXPECT_EQ(g.num_workers(), 3);
  EXPECT_EQ(g.Identify(5, 0, "token10").code(), Code::kUnauthenticated) << "the old token is void";
  EXPECT_TRUE(g.Identify(5, 2, "token22").ok());
}

TEST(ServerGenerationTest, FinishedAndJoinedWorkersAsContributors) {
  ServerGeneration g;
  g.Start(Book(1, 4));
  g.WorkerFinished(1, /*joined=*/false);
  g.WorkerFinished(3, /*joined=*/true);
  EXPECT_EQ(g.FinishedContributors(Spec()), (std::set<int>{1, 3}));
  EXPECT_EQ(g.JoinedContributors(Spec()), (std::set<int>{3}));
  // In a process set of ranks {1, 3}, worker 3 is contribution 1.
  EXPECT_EQ(g.FinishedContributors(Spec(TensorScope::kProcess, {1, 3})), (std::set<int>{0, 1}));
  EXPECT_EQ(g.JoinedContributors(Spec(TensorScope::kProcess, {0, 3})), (std::set<int>{1}));
  EXPECT_TRUE(g.JoinedContributors(Spec(TensorScope::kPublished)).empty()) << "a publisher that joined publishes nothing";
}

TEST(ServerGenerationTest, AMachineFinishedOnceAllItsProcessesDid) {
  ServerGeneration g;
  g.Start(Book(1, 4, /*local_size=*/2));
  g.WorkerFinished(0, false);
  g.WorkerFinished(2, false);
  g.WorkerFinished(3, false);
  EXPECT_EQ(g.FinishedContributors(Spec(TensorScope::kMachine)), (std::set<int>{1}));
}

TEST(ServerGenerationTest, EndNamesTheIdentifiedAndForgetsWhoFinished) {
  ServerGeneration g;
  g.Start(Book(1, 2));
  ASSERT_TRUE(g.Identify(5, 0, "token10").ok());
  ASSERT_TRUE(g.Identify(6, 1, "token11").ok());
  g.WorkerFinished(0, true);
  EXPECT_EQ(g.End(/*dropped=*/true), (std::set<PeerId>{5, 6}));
  EXPECT_TRUE(g.dropped());
  EXPECT_TRUE(g.FinishedContributors(Spec()).empty());
  EXPECT_EQ(g.RankOf(5), 0) << "connections keep their rank until the next book";
  g.Start(Book(2, 2));
  EXPECT_FALSE(g.dropped());
}

}  // namespace
}  // namespace bps

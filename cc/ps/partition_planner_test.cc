#include "cc/ps/partition_planner.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace bps {
namespace {

TEST(PartitionPlannerTest, SplitsOnWholeElementsAndCoversTheTensor) {
  PartitionPlanner planner(2, 10);  // 10 bytes: 2 float32 elements per partition
  auto plan = planner.Plan(TensorSpec{"t", DataType::kFloat32, {7}});
  ASSERT_TRUE(plan.ok());
  const auto& parts = plan.value().partitions;
  ASSERT_EQ(parts.size(), 4u);
  uint64_t next = 0;
  for (const auto& p : parts) {
    EXPECT_EQ(p.offset, next);
    next += p.count;
  }
  EXPECT_EQ(next, 7u);
  EXPECT_EQ(parts.back().count, 1u);
}

TEST(PartitionPlannerTest, BalancesBytesAcrossServers) {
  PartitionPlanner planner(3, 4096);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(planner.Plan(TensorSpec{"t" + std::to_string(i), DataType::kFloat32, {100 + i * 37}}).ok());
  }
  auto bytes = planner.server_bytes();
  uint64_t lo = *std::min_element(bytes.begin(), bytes.end());
  uint64_t hi = *std::max_element(bytes.begin(), bytes.end());
  EXPECT_LE(hi - lo, 4096u);
}

TEST(PartitionPlannerTest, ATensorOfOnePartitionSpreadsOverEveryServer) {
  PartitionPlanner planner(4, 4096000);
  auto plan = planner.Plan(TensorSpec{"one-mb", DataType::kFloat32, {262144}});
  ASSERT_EQ(plan.value().partitions.size(), 4u);
  std::set<int> servers;
  for (const auto& p : plan.value().partitions) {
    EXPECT_EQ(p.count, 65536u);
    servers.insert(p.server);
  }
  EXPECT_EQ(servers.size(), 4u);
  // Small tensors stay whole: pieces below the min spread cost more in messages than they save.
  EXPECT_EQ(planner.Plan(TensorSpec{"small", DataType::kFloat32, {1000}}).value().partitions.size(), 1u);
}

TEST(PartitionPlannerTest, ASpreadTensorsPiecesLandOnDistinctServersWhenLoadsAreUneven) {
  PartitionPlanner planner(4, 4096000);
  // Two small tensors share a group on one server: loads 128 KB, 0, 0, 0.
  for (const char* name : {"a", "b"}) ASSERT_TRUE(planner.Plan(TensorSpec{name, DataType::kFloat32, {16384}}).ok());
  // 256 KB in 4 pieces of 64 KB: one on each server, the loaded one too (least loaded alone would put
  // a second piece on a server that has one).
  auto plan = planner.Plan(TensorSpec{"mid", DataType::kFloat32, {65536}});
  ASSERT_EQ(plan.value().partitions.size(), 4u);
  std::set<int> servers;
  for (const auto& p : plan.value().partitions) servers.insert(p.server);
  EXPECT_EQ(servers.size(), 4u);
}

TEST(PartitionPlannerTest, ATensorSpreadsOnlyInPiecesOfAtLeastTheMinimum) {
  PartitionPlanner planner(16, 4096000);
  // 512 KB over 16 servers would be 32 KB pieces: it goes to 8 servers in 64 KB pieces instead.
  auto plan = planner.Plan(TensorSpec{"half-mb", DataType::kFloat32, {131072}});
  ASSERT_EQ(plan.value().partitions.size(), 8u);
  std::set<int> servers;
  for (const auto& p : plan.value().partitions) {
    EXPECT_EQ(p.count * 4, PartitionPlanner::kDefaultMinSpreadBytes);
    servers.insert(p.server);
  }
  EXPECT_EQ(servers.size(), 8u);
}

TEST(PartitionPlannerTest, TheMinSpreadSettingSetsThePiecesAndTheGroups) {
  PartitionPlanner planner(16, 4096000, 1048576);  // BYTEPS_MIN_SPREAD_BYTES=1048576
  EXPECT_EQ(planner.group_bytes(), 1048576u);
  // 4 MB over 16 servers: 4 pieces of 1 MB on 4 servers (the default would make 16 of 256 KB).
  auto plan = planner.Plan(TensorSpec{"four-mb", DataType::kFloat32, {1048576}});
  ASSERT_EQ(plan.value().partitions.size(), 4u);
  std::set<int> servers;
  for (const auto& p : plan.value().partitions) {
    EXPECT_EQ(p.count * 4, 1048576u);
    servers.insert(p.server);
  }
  EXPECT_EQ(servers.size(), 4u);
  // Tensors of 512 KB are small now: two in a row share a server, the third opens a group elsewhere.
  std::vector<int> placed;
  for (int i = 0; i < 3; ++i) {
    auto small = planner.Plan(TensorSpec{"w" + std::to_string(i), DataType::kFloat32, {131071}});
    ASSERT_EQ(small.value().partitions.size(), 1u);
    placed.push_back(small.value().partitions[0].server);
  }
  EXPECT_EQ(placed[0], placed[1]);
  EXPECT_NE(placed[1], placed[2]);
  // Never larger than a partition: with 256 KB partitions the setting cannot make larger pieces.
  PartitionPlanner capped(4, 262144, 1048576);
  EXPECT_EQ(capped.group_bytes(), 262144u);
  for (const auto& p : capped.Plan(TensorSpec{"m", DataType::kFloat32, {262144}}).value().partitions) {
    EXPECT_EQ(p.count * 4, 262144u);
  }
}

TEST(PartitionPlannerTest, SmallTensorsPlannedInARowShareAServerUpToAGroup) {
  PartitionPlanner planner(4, 4096000);
  const uint64_t group = planner.group_bytes();
  ASSERT_EQ(group, PartitionPlanner::kMinGroupBytes);  // the default min spread is smaller
  const int per_group = static_cast<int>(group / 4096);  // 4 KB tensors that fill one group exactly
  std::vector<int> servers;
  for (int i = 0; i < 2 * per_group + 1; ++i) {
    auto plan = planner.Plan(TensorSpec{"bias" + std::to_string(i), DataType::kFloat32, {1024}});
    ASSERT_EQ(plan.value().partitions.size(), 1u);
    servers.push_back(plan.value().partitions[0].server);
  }
  for (int i = 1; i < per_group; ++i) EXPECT_EQ(servers[i], servers[0]) << "tensor " << i;
  EXPECT_NE(servers[per_group], servers[0]) << "a full group's server takes no more";
  for (int i = per_group + 1; i < 2 * per_group; ++i) EXPECT_EQ(servers[i], servers[per_group]) << "tensor " << i;
  EXPECT_NE(servers[2 * per_group], servers[per_group]);
  EXPECT_EQ(planner.server_bytes()[servers[0]], group);
}

TEST(PartitionPlannerTest, ALargeTensorBetweenSmallOnesLeavesTheirGroupOpen) {
  PartitionPlanner planner(4, 4096000);
  const int before = planner.Plan(TensorSpec{"bias", DataType::kFloat32, {1024}}).value().partitions[0].server;
  auto large = planner.Plan(TensorSpec{"kernel", DataType::kFloat32, {1 << 20}});  // 4 MB: a piece per server
  ASSERT_EQ(large.value().partitions.size(), 4u);
  EXPECT_EQ(planner.Plan(TensorSpec{"norm", DataType::kFloat32, {1024}}).value().partitions[0].server, before);
}

TEST(PartitionPlannerTest, GroupsAreNoLargerThanAPartition) {
  PartitionPlanner planner(2, 8192);  // 8 KB partitions: a group holds two 4 KB tensors
  EXPECT_EQ(planner.group_bytes(), 8192u);
  std::vector<int> servers;
  for (int i = 0; i < 4; ++i) {
    servers.push_back(
        planner.Plan(TensorSpec{"t" + std::to_string(i), DataType::kFloat32, {1024}}).value().partitions[0].server);
  }
  EXPECT_EQ(servers[0], servers[1]);
  EXPECT_NE(servers[1], servers[2]);
  EXPECT_EQ(servers[2], servers[3]);
  EXPECT_EQ(planner.server_bytes()[0], planner.server_bytes()[1]);
}

TEST(PartitionPlannerTest, KeysComeFromTheNameNotTheOrder) {
  PartitionPlanner a(1, 1024), b(1, 1024);
  ASSERT_TRUE(a.Plan(TensorSpec{"first", DataType::kFloat32, {10}}).ok());
  auto from_a = a.Plan(TensorSpec{"second", DataType::kFloat32, {10}});
  auto from_b = b.Plan(TensorSpec{"second", DataType::kFloat32, {10}});
  EXPECT_EQ(from_a.value().partitions[0].key, from_b.value().partitions[0].key);
  EXPECT_NE(TensorKeyBase("first"), TensorKeyBase("second"));
}

TEST(PartitionPlannerTest, SlicesKeepTheirPartitionsServerAndCoverTheTensor) {
  PartitionPlanner planner(2, 4000);  // 1000 float32 per partition
  planner.set_slice_bytes(1200);      // 300 float32 per slice: 4 slices per partition, the last of 100
  auto plan = planner.Plan(TensorSpec{"t", DataType::kFloat32, {2500}});
  ASSERT_TRUE(plan.ok());
  const auto& slices = plan.value().partitions;
  // Partitions [0,1000) [1000,2000) [2000,2500): 4 + 4 + 2 slices.
  ASSERT_EQ(slices.size(), 10u);
  uint64_t next = 0;
  std::set<uint64_t> keys;
  for (const auto& s : slices) {
    EXPECT_EQ(s.offset, next);
    EXPECT_LE(s.count, 300u);
    EXPECT_EQ(s.server, slices[s.offset / 1000 * 4].server) << "slice at " << s.offset;
    EXPECT_EQ(s.offset / 1000, (s.offset + s.count - 1) / 1000) << "a slice crosses a partition boundary";
    keys.insert(s.key);
    next += s.count;
  }
  EXPECT_EQ(next, 2500u);
  EXPECT_EQ(keys.size(), slices.size());
  // Key order (the order workers send in) alternates partitions, hence servers.
  EXPECT_LT(slices[0].key, slices[4].key);
  EXPECT_LT(slices[4].key, slices[1].key);
  EXPECT_NE(slices[0].server, slices[4].server);
  EXPECT_EQ(planner.server_bytes()[0] + planner.server_bytes()[1], 10000u);
}

TEST(PartitionPlannerTest, EmptyAndScalarTensors) {
  PartitionPlanner planner(2, 1024);
  EXPECT_EQ(planner.Plan(TensorSpec{"empty", DataType::kFloat64, {0, 3}}).value().partitions.size(), 0u);
  EXPECT_EQ(planner.Plan(TensorSpec{"scalar", DataType::kFloat64, {}}).value().partitions.size(), 1u);
}

}  // namespace
}  // namespace bps

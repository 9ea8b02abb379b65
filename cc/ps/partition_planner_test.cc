#include "cc/ps/partition_planner.h"

#include <gtest/gtest.h>

#include <set>

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
  // Small tensors stay whole: pieces below kMinSpreadBytes cost more in messages than they save.
  EXPECT_EQ(planner.Plan(TensorSpec{"small", DataType::kFloat32, {1000}}).value().partitions.size(), 1u);
}

TEST(PartitionPlannerTest, KeysComeFromTheNameNotTheOrder) {
  PartitionPlanner a(1, 1024), b(1, 1024);
  a.Plan(TensorSpec{"first", DataType::kFloat32, {10}});
  auto from_a = a.Plan(TensorSpec{"second", DataType::kFloat32, {10}});
  auto from_b = b.Plan(TensorSpec{"second", DataType::kFloat32, {10}});
  EXPECT_EQ(from_a.value().partitions[0].key, from_b.value().partitions[0].key);
  EXPECT_NE(TensorKeyBase("first"), TensorKeyBase("second"));
}

TEST(PartitionPlannerTest, EmptyAndScalarTensors) {
  PartitionPlanner planner(2, 1024);
  EXPECT_EQ(planner.Plan(TensorSpec{"empty", DataType::kFloat64, {0, 3}}).value().partitions.size(), 0u);
  EXPECT_EQ(planner.Plan(TensorSpec{"scalar", DataType::kFloat64, {}}).value().partitions.size(), 1u);
}

}  // namespace
}  // namespace bps

#include "cc/python/handles.h"

#include <gtest/gtest.h>

#include <set>

namespace bps {
namespace {

TEST(HandleTable, HandleIsKnownUntilRemoved) {
  HandleTable table;
  HandleTable::Added added = table.Add();
  ASSERT_NE(table.Get(added.handle), nullptr);
  EXPECT_EQ(table.Get(added.handle).get(), added.completion);
  added.completion->Set(Status::OK());
  table.Remove(added.handle);
  EXPECT_EQ(table.Get(added.handle), nullptr);
  table.Remove(added.handle);  // twice: nothing happens
  EXPECT_EQ(table.Get(-1), nullptr);
  EXPECT_EQ(table.Get(12345), nullptr);
}

TEST(HandleTable, ReusedSlotStartsAfreshUnderAnotherHandle) {
  HandleTable table;
  HandleTable::Added first = table.Add();
  first.completion->Set(Aborted("failed"));
  table.Remove(first.handle);
  HandleTable::Added second = table.Add();
  EXPECT_EQ(second.completion, first.completion);  // recycled: no allocation
  EXPECT_NE(second.handle, first.handle);           // the old handle does not name the new push_pull
  EXPECT_EQ(table.Get(first.handle), nullptr);
  EXPECT_FALSE(second.completion->Done());
  EXPECT_TRUE(second.completion->status.ok());
}

TEST(HandleTable, ManyInFlightHaveDistinctHandlesAndCompletions) {
  HandleTable table;
  std::set<int64_t> handles;
  std::set<Completion*> completions;
  for (int i = 0; i < 100; ++i) {
    HandleTable::Added added = table.Add();
    handles.insert(added.handle);
    completions.insert(added.completion);
  }
  EXPECT_EQ(handles.size(), 100u);
  EXPECT_EQ(completions.size(), 100u);
}

TEST(HandleTable, CompletionHeldElsewhereIsNotRecycled) {
  HandleTable table;
  HandleTable::Added added = table.Add();
  std::shared_ptr<Completion> waiter = table.Get(added.handle);  // another thread waiting on the handle
  added.completion->Set(Aborted("failed"));
  table.Remove(added.handle);
  HandleTable::Added next = table.Add();
  EXPECT_NE(next.completion, waiter.get());
  EXPECT_TRUE(waiter->Done());  // the waiter still sees its own result
  EXPECT_EQ(waiter->status.code(), Code::kAborted);
}

}  // namespace
}  // namespace bps

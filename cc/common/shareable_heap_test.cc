// Runs with jemalloc as the process's malloc and bps_tf's router ahead of it (both linked first), as a
// worker does under bpslaunch.
#include "cc/common/shareable_heap.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace bps {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// What TensorFlow's allocator does.
char* Aligned(size_t bytes) {
  void* block = nullptr;
  return posix_memalign(&block, 64, bytes) == 0 ? static_cast<char*>(block) : nullptr;
}

TEST(ShareableHeapTest, LargeAlignedBlocksAreSeenByAView) {
  ShareableHeap* heap = ShareableHeap::Get();
  ASSERT_NE(heap, nullptr);
  auto view = SharedArenaView::Open(heap->locator());
  ASSERT_TRUE(view.ok()) << view.status().message();

  const size_t bytes = 16 * kMiB + 12;
  char* block = Aligned(bytes);
  ASSERT_NE(block, nullptr);
  auto offset = heap->OffsetOf(block, bytes);
  ASSERT_TRUE(offset);
  char* seen = view.value()->At(*offset, bytes);
  ASSERT_NE(seen, nullptr);
  std::memset(block, 3, bytes);
  EXPECT_EQ(seen[0], 3);
  EXPECT_EQ(seen[bytes - 1], 3);
  seen[bytes / 2] = 9;  // and the other way round
  EXPECT_EQ(block[bytes / 2], 9);
  std::free(block);

  char* small = Aligned(kMiB - 64);
  EXPECT_FALSE(heap->OffsetOf(small, 1));
  std::free(small);
  void* from_std = std::aligned_alloc(4096, 4 * kMiB);
  EXPECT_TRUE(heap->OffsetOf(from_std, 4 * kMiB));
  std::free(from_std);
  // malloc and calloc (NumPy's arrays) keep jemalloc's ordinary arenas, whatever their size.
  void* plain = std::malloc(16 * kMiB);
  void* zeroed = std::calloc(16 * kMiB, 1);
  EXPECT_FALSE(heap->OffsetOf(plain, 1));
  EXPECT_FALSE(heap->OffsetOf(zeroed, 1));
  std::free(plain);
  std::free(zeroed);
  int on_stack = 0;
  EXPECT_FALSE(heap->OffsetOf(&on_stack, sizeof(on_stack)));
}

TEST(ShareableHeapTest, BlocksFreedAndTakenAgainKeepTheirContents) {
  ShareableHeap* heap = ShareableHeap::Get();
  ASSERT_NE(heap, nullptr);
  std::vector<char*> blocks;
  std::vector<size_t> sizes;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 12; ++i) {
      const size_t bytes = (1 + (i * 7 + round * 5) % 57) * kMiB + i;
      char* block = Aligned(bytes);
      ASSERT_NE(block, nullptr);
      ASSERT_TRUE(heap->OffsetOf(block, bytes)) << bytes;
      std::memset(block, static_cast<int>(blocks.size() % 251), bytes);
      blocks.push_back(block);
      sizes.push_back(bytes);
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      const char expected = static_cast<char>(b % 251);
      ASSERT_EQ(blocks[b][0], expected);
      ASSERT_EQ(blocks[b][sizes[b] - 1], expected);
      ASSERT_EQ(blocks[b][sizes[b] / 3], expected);
    }
    // Free every other one: jemalloc reuses them for the next round's.
    std::vector<char*> kept;
    std::vector<size_t> kept_sizes;
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (b % 2 == 0) {
        std::free(blocks[b]);
      } else {
        kept.push_back(blocks[b]);
        kept_sizes.push_back(sizes[b]);
      }
    }
    blocks.swap(kept);
    sizes.swap(kept_sizes);
    for (size_t b = 0; b < blocks.size(); ++b) std::memset(blocks[b], static_cast<int>(b % 251), sizes[b]);
  }
  for (char* block : blocks) std::free(block);
}

TEST(ShareableHeapTest, AForkedChildWritesOnlyItsOwnCopy) {
  ShareableHeap* heap = ShareableHeap::Get();
  ASSERT_NE(heap, nullptr);
  const size_t bytes = 24 * kMiB;
  char* parents = Aligned(bytes);
  ASSERT_TRUE(heap->OffsetOf(parents, bytes));
  std::memset(parents, 1, bytes);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child sees what its parent allocated, owns it, and shares nothing any more.
    int failures = 0;
    failures += parents[bytes - 1] != 1;
    failures += heap->OffsetOf(parents, bytes).has_value();
    std::memset(parents, 2, bytes);
    std::free(parents);
    for (int i = 0; i < 4; ++i) {
      char* block = Aligned(bytes);
      std::memset(block, 3, bytes);
      failures += heap->OffsetOf(block, bytes).has_value();
      std::free(block);
    }
    _exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(parents[i], 1) << i;
  // The parent's next blocks are its own as well.
  char* next = Aligned(bytes);
  ASSERT_TRUE(heap->OffsetOf(next, bytes));
  std::memset(next, 4, bytes);
  for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(parents[i], 1) << i;
  std::free(next);
  std::free(parents);
}

}  // namespace
}  // namespace bps

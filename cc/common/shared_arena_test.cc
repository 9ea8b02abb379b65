#include "cc/common/shared_arena.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace bps {
namespace {

TEST(SharedArenaTest, ViewSeesWhatTheArenaWritesAndTheOtherWayRound) {
  auto arena = SharedArena::Create(size_t(1) << 30);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto a = arena.value()->Allocate(10);
  auto b = arena.value()->Allocate(5000);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->offset % 4096, 0u);
  EXPECT_EQ(b->offset, a->offset + 4096);  // page-aligned blocks, one after the other
  std::memcpy(a->data, "hello", 6);

  auto view = SharedArenaView::Open(arena.value()->locator());
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_STREQ(view.value()->At(a->offset, 6), "hello");
  std::memset(view.value()->At(b->offset, 5000), 7, 5000);
  EXPECT_EQ(b->data[4999], 7);
  EXPECT_EQ(b->data[0], 7);
}

TEST(SharedArenaTest, TheUnmapHookSeesEachViewsMappingWhileItIsStillMapped) {
  auto arena = SharedArena::Create(size_t(1) << 30);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto block = arena.value()->Allocate(10);
  ASSERT_TRUE(block);
  std::memcpy(block->data, "mapped", 7);
  std::vector<std::pair<char*, size_t>> unmapped;
  std::string seen;
  SharedArenaView::SetUnmapHook([&](char* base, size_t size) {
    unmapped.emplace_back(base, size);
    seen = base + block->offset;  // still readable inside the hook
  });
  char* at = nullptr;
  {
    auto view = SharedArenaView::Open(arena.value()->locator());
    ASSERT_TRUE(view.ok()) << view.status().message();
    at = view.value()->At(block->offset, 7);
    EXPECT_TRUE(unmapped.empty());
  }
  SharedArenaView::SetUnmapHook(nullptr);
  ASSERT_EQ(unmapped.size(), 1u);
  EXPECT_EQ(unmapped[0].first + block->offset, at);
  EXPECT_GE(unmapped[0].second, size_t(1) << 30);
  EXPECT_EQ(seen, "mapped");
}

TEST(SharedArenaTest, FullArenaAndOutOfRangeOffsetsSayNo) {
  auto arena = SharedArena::Create(4 * 4096);  // the first page is the header
  ASSERT_TRUE(arena.ok());
  EXPECT_TRUE(arena.value()->Allocate(2 * 4096));
  EXPECT_FALSE(arena.value()->Allocate(2 * 4096));
  EXPECT_TRUE(arena.value()->Allocate(4096));
  auto view = SharedArenaView::Open(arena.value()->locator());
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.value()->At(0, 8), nullptr);  // the header is not a block
  EXPECT_NE(view.value()->At(4096, 3 * 4096), nullptr);
  EXPECT_EQ(view.value()->At(4096, 3 * 4096 + 1), nullptr);
  EXPECT_EQ(view.value()->At(~uint64_t(0), 1), nullptr);
}

// The memory the file holds, in bytes (st_blocks counts 512-byte units).
size_t FileMemory(const std::string& locator) {
  std::istringstream parts(locator);
  long pid = 0;
  int fd = -1;
  parts >> pid >> fd;
  struct stat st;
  EXPECT_EQ(stat(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd)).c_str(), &st), 0);
  return static_cast<size_t>(st.st_blocks) * 512;
}

TEST(SharedArenaTest, ADiscardedBlockGivesItsMemoryBackAndIsNotHandedOutAgain) {
  auto arena = SharedArena::Create(size_t(1) << 30);
  ASSERT_TRUE(arena.ok());
  const size_t bytes = 64 << 20;
  auto block = arena.value()->Allocate(bytes);
  ASSERT_TRUE(block);
  std::memset(block->data, 1, bytes);
  const std::string locator = arena.value()->locator();
  EXPECT_GE(FileMemory(locator), bytes);
  arena.value()->Discard(*block, bytes);
  EXPECT_LT(FileMemory(locator), bytes / 8);
  auto next = arena.value()->Allocate(4096);
  ASSERT_TRUE(next);
  EXPECT_GE(next->offset, block->offset + bytes) << "discarded addresses stay unused";
  block->data[0] = 2;  // a late write lands in no live block
  EXPECT_EQ(next->data[0], 0);
}

TEST(SharedArenaTest, WrongTokenOrFileIsRefused) {
  auto arena = SharedArena::Create(size_t(1) << 20);
  ASSERT_TRUE(arena.ok());
  std::istringstream parts(arena.value()->locator());
  long pid;
  int fd;
  uint64_t token;
  parts >> pid >> fd >> token;
  std::ostringstream wrong_token;
  wrong_token << pid << " " << fd << " " << token + 1;
  EXPECT_FALSE(SharedArenaView::Open(wrong_token.str()).ok());
  std::ostringstream not_a_file;
  not_a_file << pid << " " << 987654 << " " << token;
  EXPECT_FALSE(SharedArenaView::Open(not_a_file.str()).ok());
  EXPECT_FALSE(SharedArenaView::Open("garbage").ok());
}

// A file its owner could shrink under a peer's mapping (a read past its end kills the reader) is refused.
TEST(SharedArenaTest, AFileNotSealedAgainstShrinkingIsRefused) {
  const int fd = memfd_create("not_sealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  const uint64_t token = 12345;
  ASSERT_EQ(pwrite(fd, &token, sizeof(token), 0), static_cast<ssize_t>(sizeof(token)));
  std::ostringstream locator;
  locator << getpid() << " " << fd << " " << token;
  auto view = SharedArenaView::Open(locator.str());
  EXPECT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("sealed"), std::string::npos) << view.status().message();
  close(fd);
}

// A hugetlbfs file passes the other checks, but its pages may be missing when touched (SIGBUS): refused
// before it is mapped.
TEST(SharedArenaTest, AHugePageFileIsRefusedBeforeItIsMapped) {
  const int fd = memfd_create("huge", MFD_CLOEXEC | MFD_HUGETLB | MFD_ALLOW_SEALING);
  if (fd < 0) GTEST_SKIP() << "no hugetlbfs memfd on this kernel";
  if (ftruncate(fd, 2 << 20) != 0) {
    close(fd);
    GTEST_SKIP() << "hugetlbfs file cannot be sized here";
  }
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  std::ostringstream locator;
  locator << getpid() << " " << fd << " " << 12345;
  auto view = SharedArenaView::Open(locator.str());
  EXPECT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("tmpfs"), std::string::npos) << view.status().message();
  close(fd);
}

TEST(SharedArenaTest, AlignedBlocksAndOffsetsOfAddresses) {
  auto arena = SharedArena::Create(size_t(1) << 30);
  ASSERT_TRUE(arena.ok());
  auto a = arena.value()->Allocate(100);
  auto b = arena.value()->AllocateAligned(5 << 20, 2 << 20);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % (2 << 20), 0u);
  EXPECT_EQ(arena.value()->OffsetOf(b->data + 10, 100), b->offset + 10);
  EXPECT_FALSE(arena.value()->OffsetOf(b->data, size_t(1) << 31));  // runs past the end
  int elsewhere = 0;
  EXPECT_FALSE(arena.value()->OffsetOf(&elsewhere, 1));
  EXPECT_FALSE(arena.value()->OffsetOf(b->data - b->offset, 1));  // the header
  EXPECT_TRUE(arena.value()->Holds(b->data));
}

// A forked child's arena becomes its own: it reads the file until it writes, and allocates nothing more
// from it.
TEST(SharedArenaTest, AForkedChildsArenaIsItsOwn) {
  {
    auto arena = SharedArena::Create(size_t(1) << 30);
    ASSERT_TRUE(arena.ok());
    const size_t bytes = 8 << 20;
    auto block = arena.value()->Allocate(bytes);
    ASSERT_TRUE(block);
    std::memset(block->data, 1, bytes);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      arena.value()->MakePrivate();
      int failures = block->data[bytes - 1] != 1;
      failures += arena.value()->OffsetOf(block->data, 1).has_value();
      std::memset(block->data, 2, bytes);
      failures += block->data[0] != 2;
      failures += arena.value()->Allocate(bytes).has_value();  // its allocations go elsewhere
      _exit(failures);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(block->data[i], 1) << i;
    auto next = arena.value()->Allocate(bytes);
    ASSERT_TRUE(next);
    EXPECT_EQ(next->data[0], 0) << "the child's blocks never reach the parent";
  }
}

}  // namespace
}  // namespace bps

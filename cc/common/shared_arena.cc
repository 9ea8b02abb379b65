#include "cc/common/shared_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>

namespace bps {
namespace {

constexpr size_t kPage = 4096;
// The first page holds the token; blocks follow.
constexpr size_t kHeaderBytes = kPage;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

size_t RoundUpToPage(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

std::mutex g_unmap_hook_mu;
std::function<void(char*, size_t)> g_unmap_hook;

// The reservation is mostly never written; a core dump of the process should not try to include it.
void KeepOutOfCoreDumps(void* base, size_t size) { madvise(base, size, MADV_DONTDUMP); }

}  // namespace

StatusOr<std::unique_ptr<SharedArena>> SharedArena::Create(size_t capacity, const char* name) {
  capacity = RoundUpToPage(capacity);
  if (capacity <= kHeaderBytes) return InvalidArgument("a shared arena needs more than one page");
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Unavailable(Errno("memfd_create"));
  // A sparse file: pages exist only once written. Sealed at its size: a peer that maps it must not be
  // able to shrink it under another's mapping (a read past the end would kill that process with SIGBUS).
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Status error = Unavailable(Errno("sizing the shared arena"));
    close(fd);
    return error;
  }
  void* base = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    Status error = Unavailable(Errno("mmap of the shared arena"));
    close(fd);
    return error;
  }
  KeepOutOfCoreDumps(base, capacity);
  uint64_t token = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::memcpy(base, &token, sizeof(token));
  std::ostringstream locator;
  locator << getpid() << " " << fd << " " << token;
  return std::unique_ptr<SharedArena>(new SharedArena(fd, static_cast<char*>(base), capacity, locator.str()));
}

SharedArena::SharedArena(int fd, char* base, size_t capacity, std::string locator)
    : fd_(fd), base_(base), capacity_(capacity), locator_(std::move(locator)), used_(kHeaderBytes) {}

SharedArena::~SharedArena() {
  munmap(base_, capacity_);
  close(fd_);
}

std::optional<SharedArena::Block> SharedArena::Allocate(size_t bytes) {
  const size_t size = RoundUpToPage(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (size > capacity_ - used_) return std::nullopt;
  Block block{base_ + used_, used_};
  used_ += size;
  return block;
}

std::optional<SharedArena::Block> SharedArena::AllocateAligned(size_t bytes, size_t alignment) {
  if (alignment <= kPage) return Allocate(bytes);
  if (alignment & (alignment - 1)) return std::nullopt;
  const size_t size = RoundUpToPage(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  // Offsets are aligned as addresses are: the mapping starts on a page, and alignments above a page are
  // taken from the address.
  const uintptr_t at = reinterpret_cast<uintptr_t>(base_) + used_;
  const size_t skip = (alignment - at % alignment) % alignment;
  if (skip > capacity_ - used_ || size > capacity_ - used_ - skip) return std::nullopt;
  Block block{base_ + used_ + skip, used_ + skip};
  used_ += skip + size;
  return block;
}

void SharedArena::Discard(const Block& block, size_t bytes) {
  const size_t size = RoundUpToPage(bytes == 0 ? 1 : bytes);
  if (block.offset < kHeaderBytes || block.offset > capacity_ || size > capacity_ - block.offset) return;
  if (private_) return;  // the file is the parent's: its pages are not this process's to give back
  // Best effort: where the kernel cannot punch holes the pages stay, as they did before.
  (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(block.offset),
                  static_cast<off_t>(size));
}

std::optional<uint64_t> SharedArena::OffsetOf(const void* data, size_t bytes) const {
  if (private_) return std::nullopt;
  const char* at = static_cast<const char*>(data);
  if (at < base_ + kHeaderBytes || at >= base_ + capacity_) return std::nullopt;
  const uint64_t offset = static_cast<uint64_t>(at - base_);
  if (bytes > capacity_ - offset) return std::nullopt;
  return offset;
}

bool SharedArena::Holds(const void* data) const {
  const char* at = static_cast<const char*>(data);
  return at >= base_ && at < base_ + capacity_;
}

void SharedArena::MakePrivate() {
  if (private_) return;
  const size_t used = used_;
  if (mmap(base_, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, fd_, 0) == MAP_FAILED ||
      mmap(base_ + used, capacity_ - used, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED) {
    std::abort();  // a child sharing its parent's memory would corrupt both
  }
  used_ = capacity_;  // full
  private_ = true;
}

StatusOr<std::unique_ptr<SharedArenaView>> SharedArenaView::Open(const std::string& locator) {
  std::istringstream parts(locator);
  long pid = 0;
  int fd = -1;
  uint64_t token = 0;
  if (!(parts >> pid >> fd >> token)) return InvalidArgument("malformed shared arena locator '" + locator + "'");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  // In another PID namespace the path may name any file of another process: open nothing that could
  // block or become a terminal, and map only a regular file.
  int mine = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (mine < 0) return Unavailable(Errno("cannot open " + path));
  struct stat st;
  if (fstat(mine, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= static_cast<off_t>(kHeaderBytes)) {
    close(mine);
    return Unavailable(path + " is not a shared arena");
  }
  // Only a file of ordinary shared memory (a hugetlbfs file's pages may be missing when touched: SIGBUS) that
  // cannot change size under this mapping (SharedArena::Create seals it so).
  struct statfs fs;
  if (fstatfs(mine, &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
    close(mine);
    return Unavailable(path + " is not in shared memory (tmpfs): not a shared arena");
  }
  const int seals = fcntl(mine, F_GET_SEALS);
  const int needed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (seals < 0 || (seals & needed) != needed) {
    close(mine);
    return Unavailable(path + " is not sealed at its size: not a shared arena");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mine, 0);
  close(mine);  // the mapping keeps the memory
  if (base == MAP_FAILED) return Unavailable(Errno("mmap of " + path));
  KeepOutOfCoreDumps(base, size);
  uint64_t found = 0;
  std::memcpy(&found, base, sizeof(found));
  if (found != token) {
    munmap(base, size);
    return Unavailable(path + " is another process's file (the server runs in another PID namespace?)");
  }
  return std::unique_ptr<SharedArenaView>(new SharedArenaView(static_cast<char*>(base), size));
}

void SharedArenaView::SetUnmapHook(std::function<void(char* base, size_t size)> hook) {
  std::lock_guard<std::mutex> lock(g_unmap_hook_mu);
  g_unmap_hook = std::move(hook);
}

SharedArenaView::~SharedArenaView() {
  std::function<void(char*, size_t)> hook;
  {
    std::lock_guard<std::mutex> lock(g_unmap_hook_mu);
    hook = g_unmap_hook;
  }
  if (hook) hook(base_, size_);
  munmap(base_, size_);
}

char* SharedArenaView::At(uint64_t offset, size_t bytes) const {
  if (offset < kHeaderBytes || offset > size_ || bytes > size_ - offset) return nullptr;
  return base_ + offset;
}

}  // namespace bps

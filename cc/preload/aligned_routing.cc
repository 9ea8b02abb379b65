// libbps_preload.so: preloaded by bpslaunch ahead of jemalloc, it sends the aligned allocations of 1 MiB and
// more (posix_memalign, aligned_alloc) to the arena of the worker's shareable heap
// (cc/common/shareable_heap.h) once bps_tf has made it, and every other call on to jemalloc unchanged.
//
// TensorFlow takes its CPU memory through posix_memalign (its allocator's regions, or each tensor without
// the BFC allocator), so its tensors land where a server on the host can read and write them; malloc and
// calloc (NumPy's arrays, Python's objects) keep jemalloc's ordinary arenas, whose fresh pages are cheaper
// to fault in (anonymous memory may take huge pages, shared memory here does not). Until bps_tf routes
// anything, and in processes that never do (servers, the scheduler), a call costs one atomic load more.
//
// No dependency but the C library: the file is loaded into every process bpslaunch starts.
#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace {

using PosixMemalign = int(void**, size_t, size_t);
using AlignedAlloc = void*(size_t, size_t);
using Mallocx = void*(size_t, int);

// jemalloc's mallocx flags (its documented ABI): the arena, no thread cache (blocks this large skip it).
int ArenaFlags(unsigned arena) { return static_cast<int>((arena + 1) << 20) | (1 << 8); }
int AlignFlags(size_t alignment) { return __builtin_ctzl(alignment); }

std::atomic<Mallocx*> g_mallocx{nullptr};  // set last: routing is on once it is
int g_flags = 0;
size_t g_min_bytes = SIZE_MAX;

bool PowerOfTwo(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

void* Routed(size_t alignment, size_t size) {
  Mallocx* mallocx = g_mallocx.load(std::memory_order_acquire);
  if (mallocx == nullptr || size < g_min_bytes || !PowerOfTwo(alignment)) return nullptr;
  return mallocx(size, g_flags | AlignFlags(alignment));
}

// The next library's `name` (jemalloc's, or the C library's), looked up on first use. Plain atomics, not
// function-local statics: those would need the C++ runtime's guards.
template <class F>
F* Next(std::atomic<F*>& cached, const char* name) {
  F* next = cached.load(std::memory_order_acquire);
  if (next == nullptr) {
    next = reinterpret_cast<F*>(dlsym(RTLD_NEXT, name));
    cached.store(next, std::memory_order_release);
  }
  return next;
}
std::atomic<PosixMemalign*> g_next_posix_memalign{nullptr};
std::atomic<AlignedAlloc*> g_next_aligned_alloc{nullptr};

}  // namespace

extern "C" {

// Called once by bps_tf: aligned allocations of `min_bytes` or more go to jemalloc arena `arena` through
// `mallocx` (jemalloc's).
__attribute__((visibility("default"))) void bps_tf_route_aligned_allocations(unsigned arena, size_t min_bytes,
                                                                              void* mallocx) {
  g_flags = ArenaFlags(arena);
  g_min_bytes = min_bytes;
  g_mallocx.store(reinterpret_cast<Mallocx*>(mallocx), std::memory_order_release);
}

__attribute__((visibility("default"))) int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment >= sizeof(void*)) {
    if (void* block = Routed(alignment, size)) {
      *out = block;
      return 0;
    }
  }
  PosixMemalign* next = Next(g_next_posix_memalign, "posix_memalign");
  return next != nullptr ? next(out, alignment, size) : ENOMEM;
}

__attribute__((visibility("default"))) void* aligned_alloc(size_t alignment, size_t size) {
  if (void* block = Routed(alignment, size)) return block;
  AlignedAlloc* next = Next(g_next_aligned_alloc, "aligned_alloc");
  return next != nullptr ? next(alignment, size) : nullptr;
}

}  // extern "C"

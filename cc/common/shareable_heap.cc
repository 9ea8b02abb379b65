#include "cc/common/shareable_heap.h"

#include <dlfcn.h>
#include <pthread.h>

#include <mutex>
#include <string>

#include "cc/common/logging.h"

namespace bps {
namespace {

// jemalloc 5's extent hooks (its documented ABI; the header is not needed). Boolean hooks return false on
// success; true refuses, and jemalloc copes (keeps the memory, or does without the operation).
struct ExtentHooks;
using AllocHook = void*(ExtentHooks*, void* new_addr, size_t size, size_t alignment, bool* zero, bool* commit,
                        unsigned arena);
using DallocHook = bool(ExtentHooks*, void* addr, size_t size, bool committed, unsigned arena);
using DestroyHook = void(ExtentHooks*, void* addr, size_t size, bool committed, unsigned arena);
using RangeHook = bool(ExtentHooks*, void* addr, size_t size, size_t offset, size_t length, unsigned arena);
using SplitHook = bool(ExtentHooks*, void* addr, size_t size, size_t size_a, size_t size_b, bool committed,
                       unsigned arena);
using MergeHook = bool(ExtentHooks*, void* addr_a, size_t size_a, void* addr_b, size_t size_b, bool committed,
                       unsigned arena);
struct ExtentHooks {
  AllocHook* alloc;
  DallocHook* dalloc;
  DestroyHook* destroy;
  RangeHook* commit;
  RangeHook* decommit;
  RangeHook* purge_lazy;
  RangeHook* purge_forced;
  SplitHook* split;
  MergeHook* merge;
};
using Mallctl = int(const char* name, void* old_value, size_t* old_size, void* new_value, size_t new_size);
// What jemalloc 5.3's experimental.arenas_create_ext takes: the hooks, and whether the arena's own metadata
// comes through them too.
struct ArenaConfig {
  ExtentHooks* extent_hooks;
  bool metadata_use_hooks;
};

// The heap's memory, and jemalloc's default hooks (a block taken when the heap is full stays theirs). Set
// once, before the hooks are installed; read by the hooks.
SharedArena* g_arena = nullptr;
ExtentHooks* g_previous = nullptr;

bool Ours(const void* addr) { return g_arena->Holds(addr); }

void* Alloc(ExtentHooks*, void* new_addr, size_t size, size_t alignment, bool* zero, bool* commit, unsigned arena) {
  // A given address is jemalloc growing an extent in place: the heap does not place blocks by request.
  if (new_addr != nullptr) return nullptr;
  auto block = g_arena->AllocateAligned(size, alignment);
  if (!block) {
    return g_previous->alloc ? g_previous->alloc(g_previous, new_addr, size, alignment, zero, commit, arena) : nullptr;
  }
  *zero = true;  // addresses are never handed out twice: the file's pages there were never written
  *commit = true;
  return block->data;
}

bool Dalloc(ExtentHooks*, void* addr, size_t size, bool committed, unsigned arena) {
  if (Ours(addr)) return true;  // kept by jemalloc for reuse
  return g_previous->dalloc ? g_previous->dalloc(g_previous, addr, size, committed, arena) : true;
}

void Destroy(ExtentHooks*, void* addr, size_t size, bool committed, unsigned arena) {
  if (Ours(addr)) {
    auto at = g_arena->OffsetOf(addr, size);
    if (at) g_arena->Discard(SharedArena::Block{static_cast<char*>(addr), *at}, size);
    return;
  }
  if (g_previous->destroy) g_previous->destroy(g_previous, addr, size, committed, arena);
}

bool Commit(ExtentHooks*, void* addr, size_t size, size_t offset, size_t length, unsigned arena) {
  if (Ours(addr)) return false;  // always committed
  return g_previous->commit ? g_previous->commit(g_previous, addr, size, offset, length, arena) : true;
}

bool Decommit(ExtentHooks*, void* addr, size_t size, size_t offset, size_t length, unsigned arena) {
  if (Ours(addr)) return true;
  return g_previous->decommit ? g_previous->decommit(g_previous, addr, size, offset, length, arena) : true;
}

bool PurgeLazy(ExtentHooks*, void* addr, size_t size, size_t offset, size_t length, unsigned arena) {
  if (Ours(addr)) return true;  // only forced purges: their pages read as zeros afterwards
  return g_previous->purge_lazy ? g_previous->purge_lazy(g_previous, addr, size, offset, length, arena) : true;
}

bool PurgeForced(ExtentHooks*, void* addr, size_t size, size_t offset, size_t length, unsigned arena) {
  if (Ours(addr)) {
    char* from = static_cast<char*>(addr) + offset;
    auto at = g_arena->OffsetOf(from, length);
    if (!at) return true;  // made private in a forked child: Discard would not reach this memory
    g_arena->Discard(SharedArena::Block{from, *at}, length);
    return false;
  }
  return g_previous->purge_forced ? g_previous->purge_forced(g_previous, addr, size, offset, length, arena) : true;
}

bool Split(ExtentHooks*, void* addr, size_t size, size_t size_a, size_t size_b, bool committed, unsigned arena) {
  if (Ours(addr)) return false;  // one mapping: any part of it is as good as the whole
  return g_previous->split ? g_previous->split(g_previous, addr, size, size_a, size_b, committed, arena) : true;
}

bool Merge(ExtentHooks*, void* addr_a, size_t size_a, void* addr_b, size_t size_b, bool committed, unsigned arena) {
  const bool a = Ours(addr_a);
  if (a != Ours(addr_b)) return true;  // never an extent half in the heap
  if (a) return false;
  return g_previous->merge ? g_previous->merge(g_previous, addr_a, size_a, addr_b, size_b, committed, arena) : true;
}

ExtentHooks g_hooks = {Alloc, Dalloc, Destroy, Commit, Decommit, PurgeLazy, PurgeForced, Split, Merge};

void MakeHeapPrivateInChild() { g_arena->MakePrivate(); }

// Address space for the heap; memory is used only as written.
constexpr size_t kReservedBytes = size_t(256) << 30;

}  // namespace

ShareableHeap* ShareableHeap::Install(std::string* why) {
  auto* mallctl = reinterpret_cast<Mallctl*>(dlsym(RTLD_DEFAULT, "mallctl"));
  void* mallocx = dlsym(RTLD_DEFAULT, "mallocx");
  if (mallctl == nullptr || mallocx == nullptr) {
    *why = "the process's malloc is not jemalloc (bpslaunch preloads it where libjemalloc2 is installed)";
    return nullptr;
  }
  using Route = void(unsigned arena, size_t min_bytes, void* mallocx);
  auto* route = reinterpret_cast<Route*>(dlsym(RTLD_DEFAULT, "bps_tf_route_aligned_allocations"));
  if (route == nullptr) {
    *why = "bps_tf's allocation router (libbps_preload.so, which bpslaunch preloads with jemalloc) is not loaded";
    return nullptr;
  }
  // The hooks every arena has by default take a block the heap has no room for.
  ExtentHooks* previous = nullptr;
  size_t size = sizeof(previous);
  if (mallctl("arena.0.extent_hooks", &previous, &size, nullptr, 0) != 0 || previous == nullptr) {
    *why = "jemalloc did not give its default extent hooks";
    return nullptr;
  }
  auto created = SharedArena::Create(kReservedBytes, "bps_tf_heap");
  if (!created.ok()) {
    *why = created.status().message();
    return nullptr;
  }
  g_arena = created.value().release();
  g_previous = previous;
  // The arena's own metadata stays in ordinary memory: private to each process after a fork, so that a
  // forked child's allocator never sees its parent's change under it (the heap's file does).
  unsigned arena = 0;
  size = sizeof(arena);
  ArenaConfig config{&g_hooks, /*metadata_use_hooks=*/false};
  if (mallctl("experimental.arenas_create_ext", &arena, &size, &config, sizeof(config)) != 0) {
    *why = "jemalloc is older than 5.3 (it has no experimental.arenas_create_ext)";
    return nullptr;
  }
  pthread_atfork(nullptr, nullptr, MakeHeapPrivateInChild);
  route(arena, kMinBytes, mallocx);
  return new ShareableHeap(g_arena);
}

ShareableHeap* ShareableHeap::Get() {
  static ShareableHeap* heap = [] {
    std::string why;
    ShareableHeap* installed = Install(&why);
    if (installed == nullptr) {
      BPS_LOG(Info) << "tensors are copied to servers on this host: " << why;
    }
    return installed;
  }();
  return heap;
}

}  // namespace bps

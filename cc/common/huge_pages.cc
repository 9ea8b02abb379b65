#include "cc/common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace bps {

void AdviseHugePages(void* data, size_t bytes) {
  if (data == nullptr || bytes < kHugePageAdviceMinBytes) return;
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end <= begin) return;
#ifdef MADV_HUGEPAGE
  // Failure (no THP in this kernel, memory not ours to advise) leaves ordinary pages: nothing to report.
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

}  // namespace bps

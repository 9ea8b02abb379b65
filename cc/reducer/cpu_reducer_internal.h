// Hooks for tests and benchmarks to choose the kernel set, so both sets are exercised on any machine.
#pragma once

namespace bps {
namespace internal {

// true: use the portable kernels (baseline x86-64 loops, scalar float16 conversion) even where AVX2 and F16C
// exist. false: back to choosing by CPU.
void ForcePortableKernels(bool force);

// Name of the kernel set the reducer uses now: "avx2_f16c" or "portable".
const char* ActiveKernelsName();

}  // namespace internal
}  // namespace bps

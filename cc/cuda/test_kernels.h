// Device-side test data for the GPU tests and benchmarks (large buffers are filled and checked on the GPU,
// without host copies): element i of rank r is test_data::Value(r, i).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cc/common/dtype.h"

namespace bps {
namespace cuda {

cudaError_t LaunchFill(DataType dtype, void* data, uint64_t count, int rank, cudaStream_t stream);

// Adds to *mismatches the number of elements that are not the sum over ranks 0..ranks-1.
cudaError_t LaunchCountMismatches(DataType dtype, const void* data, uint64_t count, int ranks,
                                  unsigned long long* mismatches, cudaStream_t stream);

// Occupies `stream` until the host sets *release (`release`: the device address of mapped pinned memory).
cudaError_t LaunchSpinUntilReleased(const volatile int* release, cudaStream_t stream);

}  // namespace cuda
}  // namespace bps

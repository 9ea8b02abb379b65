// CUDA and NCCL results as Status, so errors reach the caller with the failing call named.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "cc/common/status.h"

namespace bps {
namespace cuda {

inline Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::OK();
  return Internal(std::string(what) + " failed: " + cudaGetErrorString(error));
}

inline Status NcclStatus(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return Status::OK();
  return Internal(std::string(what) + " failed: " + ncclGetErrorString(result));
}

}  // namespace cuda
}  // namespace bps

#define BPS_CUDA_RETURN_IF_ERROR(call) BPS_RETURN_IF_ERROR(::bps::cuda::CudaStatus((call), #call))
#define BPS_NCCL_RETURN_IF_ERROR(call) BPS_RETURN_IF_ERROR(::bps::cuda::NcclStatus((call), #call))

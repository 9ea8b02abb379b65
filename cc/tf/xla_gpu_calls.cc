// The custom calls of a push_pull compiled by XLA for a GPU (xla_custom_calls.h). start hands the buffer, as
// XLA's stream has it, to the GPU push_pull, which reduces it in place and then makes XLA's stream wait for
// the result; done returns once that wait is queued, so whatever XLA launches after it is ordered after the
// sum. The host waits only in done, which XLA places just before the sum's first use.
#include <cuda_runtime.h>

#include <string>

#include "cc/cuda/process_gpu.h"
#include "cc/runtime/started_requests.h"
#include "cc/tf/xla_calls.h"
#include "cc/tf/xla_custom_calls.h"

namespace bps {
namespace {

namespace ffi = xla::ffi;

ffi::Error CudaError(cudaError_t error, const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kInternal, what + ": " + cudaGetErrorString(error));
}

// The GPU that holds `data` (a zero-size buffer may have none: the current device then).
StatusOr<int> DeviceOf(const void* data) {
  int device = 0;
  if (data != nullptr) {
    cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, data) == cudaSuccess && attributes.type == cudaMemoryTypeDevice) {
      return attributes.device;
    }
  }
  if (cudaGetDevice(&device) != cudaSuccess) return Internal("no current CUDA device");
  return device;
}

ffi::Error Start(cudaStream_t stream, ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> output, std::string_view name,
                 int64_t priority, std::string_view op, std::string_view members, std::string_view compression) {
  const std::string tensor(name);
  auto engine = xla_calls::JobEngine(name);
  if (!engine.ok()) return xla_calls::ToFfiError(engine.status());
  if (op != "sum" || !members.empty() || !compression.empty()) {  // the lowering refuses these on GPUs
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "push_pull of '" + tensor + "' on a GPU sums over every worker");
  }
  DataType dtype;
  if (!xla_calls::ToCoreDtype(input.element_type(), &dtype)) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "push_pull of '" + tensor + "': unsupported dtype");
  }
  void* data = output->untyped_data();
  if (data != input.untyped_data() && input.size_bytes() > 0) {
    cudaError_t copied = cudaMemcpyAsync(data, input.untyped_data(), input.size_bytes(), cudaMemcpyDeviceToDevice, stream);
    if (copied != cudaSuccess) return CudaError(copied, "push_pull of '" + tensor + "': copying its input");
  }
  auto device = DeviceOf(data);
  if (!device.ok()) return xla_calls::ToFfiError(device.status());
  auto done = StartedRequests::Process().Start(tensor, engine.value()->config().timeout_s);
  cuda::ProcessGpuPushPull(tensor, dtype, input.element_count(), static_cast<int>(priority), /*local_devices=*/1,
                           cuda::GpuTensor{device.value(), data, stream}, std::move(done));
  return ffi::Error::Success();
}

ffi::Error Done(cudaStream_t stream, ffi::AnyBuffer started, ffi::AnyBuffer /*after*/, ffi::Result<ffi::AnyBuffer> output,
                std::string_view name) {
  ffi::Error result = xla_calls::FinishStarted(name);
  if (result.success() && output->untyped_data() != started.untyped_data() && started.size_bytes() > 0) {
    cudaError_t copied = cudaMemcpyAsync(output->untyped_data(), started.untyped_data(), started.size_bytes(),
                                         cudaMemcpyDeviceToDevice, stream);
    if (copied != cudaSuccess) return CudaError(copied, "push_pull of '" + std::string(name) + "': copying its sum");
  }
  return result;
}

XLA_FFI_DEFINE_HANDLER(kStart, Start,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<std::string_view>("name")
                           .Attr<int64_t>("priority")
                           .Attr<std::string_view>("op")
                           .Attr<std::string_view>("members")
                           .Attr<std::string_view>("compression"));
XLA_FFI_DEFINE_HANDLER(kDone, Done,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<std::string_view>("name"));

}  // namespace
}  // namespace bps

XLA_FFI_REGISTER_HANDLER(bps::xla_calls::FfiApi(), bps::kXlaPushPullStart, "CUDA", bps::kStart);
XLA_FFI_REGISTER_HANDLER(bps::xla_calls::FfiApi(), bps::kXlaPushPullDone, "CUDA", bps::kDone);
XLA_FFI_REGISTER_HANDLER(bps::xla_calls::FfiApi(), bps::kXlaAfterAll, "CUDA", bps::xla_calls::bps_tf_xla_after_all);

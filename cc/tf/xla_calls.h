// What the XLA custom calls' handlers share (xla_host_calls.cc on the CPU, xla_gpu_calls.cc on GPUs): element
// types, errors in XLA's terms, and the job's engine. Sees XLA's FFI headers, not TensorFlow.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cc/common/dtype.h"
#include "cc/common/status.h"
#include "cc/runtime/engine.h"
#include "xla/ffi/api/ffi.h"

namespace bps {
namespace xla_calls {

// XLA's FFI registry (in TensorFlow's library; its own header would bring MLIR's with it).
const XLA_FFI_Api* FfiApi();

// The core's element type of an XLA buffer, or false for one the core does not carry.
bool ToCoreDtype(xla::ffi::DataType type, DataType* out);

// A core status as the error XLA reports (OK: success).
xla::ffi::Error ToFfiError(const Status& status);

// The engine, or an error that says to call bps_tf.init() first.
StatusOr<std::shared_ptr<Engine>> JobEngine(std::string_view name);

// Waits for the push_pull started under `name` (StartedRequests); its status as XLA's error.
xla::ffi::Error FinishStarted(std::string_view name);

// kXlaAfterAll: nothing to do (its result only orders the calls that take it).
XLA_FFI_DECLARE_HANDLER_SYMBOL(bps_tf_xla_after_all);

}  // namespace xla_calls
}  // namespace bps

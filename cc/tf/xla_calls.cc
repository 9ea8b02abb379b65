#include "cc/tf/xla_calls.h"

#include "cc/runtime/process_engine.h"
#include "cc/runtime/started_requests.h"

namespace xla {
namespace ffi {
const XLA_FFI_Api* GetXlaFfiApi();  // declared in xla/ffi/ffi_api.h, defined in TensorFlow's library
}  // namespace ffi
}  // namespace xla

namespace bps {
namespace xla_calls {

namespace ffi = xla::ffi;

const XLA_FFI_Api* FfiApi() { return ffi::GetXlaFfiApi(); }

bool ToCoreDtype(ffi::DataType type, DataType* out) {
  switch (type) {
    case ffi::DataType::F16: *out = DataType::kFloat16; return true;
    case ffi::DataType::BF16: *out = DataType::kBFloat16; return true;
    case ffi::DataType::F32: *out = DataType::kFloat32; return true;
    case ffi::DataType::F64: *out = DataType::kFloat64; return true;
    case ffi::DataType::S32: *out = DataType::kInt32; return true;
    case ffi::DataType::S64: *out = DataType::kInt64; return true;
    default: return false;
  }
}

ffi::Error ToFfiError(const Status& status) {
  if (status.ok()) return ffi::Error::Success();
  switch (status.code()) {
    case Code::kInvalidArgument: return ffi::Error(ffi::ErrorCode::kInvalidArgument, status.message());
    case Code::kFailedPrecondition: return ffi::Error(ffi::ErrorCode::kFailedPrecondition, status.message());
    case Code::kDeadlineExceeded: return ffi::Error(ffi::ErrorCode::kDeadlineExceeded, status.message());
    case Code::kUnavailable: return ffi::Error(ffi::ErrorCode::kUnavailable, status.message());
    case Code::kAborted: return ffi::Error(ffi::ErrorCode::kAborted, status.message());
    case Code::kUnauthenticated: return ffi::Error(ffi::ErrorCode::kUnauthenticated, status.message());
    default: return ffi::Error(ffi::ErrorCode::kInternal, status.message());
  }
}

StatusOr<std::shared_ptr<Engine>> JobEngine(std::string_view name) {
  std::shared_ptr<Engine> engine = ProcessEngine();
  if (engine == nullptr) {
    return FailedPrecondition("push_pull of '" + std::string(name) +
                              "' ran before bps_tf.init(): call bps_tf.init() first, in a process started by "
                              "bpslaunch");
  }
  return engine;
}

ffi::Error FinishStarted(std::string_view name) {
  return ToFfiError(StartedRequests::Process().Finish(std::string(name), AbortJob));
}

namespace {
ffi::Error NothingToDo(ffi::RemainingArgs, ffi::Result<ffi::AnyBuffer>) { return ffi::Error::Success(); }
}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(bps_tf_xla_after_all, NothingToDo,
                              ffi::Ffi::Bind().RemainingArgs().Ret<ffi::AnyBuffer>());

}  // namespace xla_calls
}  // namespace bps

// The custom calls of a push_pull compiled by XLA for the CPU (xla_custom_calls.h): start hands the buffer
// to the engine, which reduces it in place; done waits for it.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cc/common/process_set.h"
#include "cc/common/reduce_op.h"
#include "cc/compress/compression_spec.h"
#include "cc/runtime/started_requests.h"
#include "cc/tf/xla_calls.h"
#include "cc/tf/xla_custom_calls.h"

namespace bps {
namespace {

namespace ffi = xla::ffi;

StatusOr<std::vector<int32_t>> ParseMembers(std::string_view text) {
  std::vector<int32_t> members;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string rank(text.substr(begin, end - begin));
    char* rest = nullptr;
    const long value = std::strtol(rank.c_str(), &rest, 10);
    if (rank.empty() || *rest != '\0' || value < 0 || value > INT32_MAX) {
      return InvalidArgument("a process set lists ranks, not '" + std::string(text) + "'");
    }
    members.push_back(static_cast<int32_t>(value));
    begin = end + 1;
  }
  return members;
}

StatusOr<PushPullRequest> MakeRequest(const ffi::AnyBuffer& buffer, void* data, std::string_view name,
                                      int64_t priority, std::string_view op, std::string_view members,
                                      std::string_view compression) {
  PushPullRequest request;
  request.name = std::string(name);
  if (!xla_calls::ToCoreDtype(buffer.element_type(), &request.dtype)) {
    return InvalidArgument("push_pull of '" + request.name + "': unsupported dtype");
  }
  for (int64_t dim : buffer.dimensions()) request.shape.push_back(dim);
  request.input = data;
  request.output = data;
  request.priority = static_cast<int>(priority);
  if (!ParseReduceOp(std::string(op), &request.op)) {
    return InvalidArgument("push_pull of '" + request.name + "': unknown op '" + std::string(op) + "'");
  }
  auto ranks = ParseMembers(members);
  if (!ranks.ok()) return ranks.status();
  request.members = std::move(ranks.value());
  auto spec = CompressionSpec::Parse(std::string(compression));
  if (!spec.ok()) return spec.status();
  request.compression = spec.value();
  return request;
}

ffi::Error Start(ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> output, std::string_view name, int64_t priority,
                 std::string_view op, std::string_view members, std::string_view compression) {
  auto engine = xla_calls::JobEngine(name);
  if (!engine.ok()) return xla_calls::ToFfiError(engine.status());
  // XLA gives start's result the input's buffer (the calls alias them); copy only if it did not.
  if (output->untyped_data() != input.untyped_data() && input.size_bytes() > 0) {
    std::memcpy(output->untyped_data(), input.untyped_data(), input.size_bytes());
  }
  auto request = MakeRequest(input, output->untyped_data(), name, priority, op, members, compression);
  if (!request.ok()) return xla_calls::ToFfiError(request.status());
  const Status member =
      CheckInProcessSet(request.value().members, engine.value()->rank(), "push_pull of '" + request.value().name + "'");
  if (!member.ok()) return xla_calls::ToFfiError(member);
  request.value().done = StartedRequests::Process().Start(request.value().name, engine.value()->config().timeout_s);
  engine.value()->Enqueue(std::move(request.value()));
  return ffi::Error::Success();
}

ffi::Error Done(ffi::AnyBuffer started, ffi::AnyBuffer /*after*/, ffi::Result<ffi::AnyBuffer> output,
                std::string_view name) {
  ffi::Error result = xla_calls::FinishStarted(name);
  if (result.success() && output->untyped_data() != started.untyped_data() && started.size_bytes() > 0) {
    std::memcpy(output->untyped_data(), started.untyped_data(), started.size_bytes());
  }
  return result;
}

XLA_FFI_DEFINE_HANDLER(kStart, Start,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<std::string_view>("name")
                           .Attr<int64_t>("priority")
                           .Attr<std::string_view>("op")
                           .Attr<std::string_view>("members")
                           .Attr<std::string_view>("compression"));
XLA_FFI_DEFINE_HANDLER(kDone, Done,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<std::string_view>("name"));

}  // namespace
}  // namespace bps

XLA_FFI_REGISTER_HANDLER(bps::xla_calls::FfiApi(), bps::kXlaPushPullStart, "Host", bps::kStart);
XLA_FFI_REGISTER_HANDLER(bps::xla_calls::FfiApi(), bps::kXlaPushPullDone, "Host", bps::kDone);
XLA_FFI_REGISTER_HANDLER(bps::xla_calls::FfiApi(), bps::kXlaAfterAll, "Host", bps::xla_calls::bps_tf_xla_after_all);

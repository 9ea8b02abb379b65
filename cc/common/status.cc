#include "cc/common/status.h"

namespace bps {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kAborted: return "ABORTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace bps

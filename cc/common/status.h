// Status: the error type of the whole core. Converted to TF or Python errors only at those boundaries.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace bps {

enum class Code {
  kOk = 0,
  kInvalidArgument,
  kFailedPrecondition,
  kDeadlineExceeded,
  kUnavailable,  // a peer died or a connection broke
  kAborted,      // the job is shutting down or was aborted elsewhere
  kInternal,
  kUnauthenticated,  // a peer that is not a member of this job
  kLastCode = kUnauthenticated,
};

const char* CodeName(Code code);

// [[nodiscard]]: a status dropped by accident is a compile warning (an error with -Werror); drop one on
// purpose with IgnoreError() and a comment saying why.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;
  void IgnoreError() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(Code::kFailedPrecondition, std::move(m)); }
inline Status DeadlineExceeded(std::string m) { return Status(Code::kDeadlineExceeded, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
inline Status Aborted(std::string m) { return Status(Code::kAborted, std::move(m)); }
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status Unauthenticated(std::string m) { return Status(Code::kUnauthenticated, std::move(m)); }

// Ends the process with `message`: for broken invariants only, never for a peer's input.
[[noreturn]] inline void DieBecause(const std::string& message) {
  std::fprintf(stderr, "bps_tf internal error: %s\n", message.c_str());
  std::abort();
}

// A value or the error that prevented it. value() of an error is a bug: it ends the process, naming the error.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(Code::kInternal, "a StatusOr was made from an OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    Check();
    return value_;
  }
  const T& value() const& {
    Check();
    return value_;
  }
  T&& value() && {
    Check();
    return std::move(value_);
  }

 private:
  void Check() const {
    if (!status_.ok()) DieBecause("value() of a failed StatusOr: " + status_.ToString());
  }
  Status status_;
  T value_{};
};

}  // namespace bps

#define BPS_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::bps::Status _bps_status = (expr);        \
    if (!_bps_status.ok()) return _bps_status; \
  } while (0)

// BPS_ASSIGN_OR_RETURN(auto x, MakeX()): declares x from a StatusOr's value, or returns its error.
#define BPS_STATUS_CONCAT_INNER(a, b) a##b
#define BPS_STATUS_CONCAT(a, b) BPS_STATUS_CONCAT_INNER(a, b)
#define BPS_ASSIGN_OR_RETURN(lhs, expr) BPS_ASSIGN_OR_RETURN_IMPL(BPS_STATUS_CONCAT(_bps_status_or_, __LINE__), lhs, expr)
#define BPS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

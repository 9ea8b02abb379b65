// Status: the error type of the whole core. Converted to TF or Python errors only at those boundaries.
#pragma once

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
};

const char* CodeName(Code code);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

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

// A value or the error that prevented it.
template <typename T>
class StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace bps

#define BPS_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::bps::Status _bps_status = (expr);      \
    if (!_bps_status.ok()) return _bps_status; \
  } while (0)

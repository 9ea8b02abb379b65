// Minimal leveled logging to stderr and CHECK macros. BYTEPS_LOG_LEVEL: DEBUG, INFO, WARNING (default), ERROR.
#pragma once

#include <mutex>
#include <sstream>
#include <string>

namespace bps {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

LogLevel MinLogLevel();

class LogMessage {
 public:
  LogMessage(const char* file, int line, LogLevel level);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// `text` from a peer, safe to log or put in an error message: bytes outside printable ASCII as \xNN, cut
// after `max_bytes`.
std::string Printable(const std::string& text, size_t max_bytes = 200);

// Warnings caused by peers (turned away, dropped), at most 10 a minute per instance: a peer sending
// garbage in a loop must not flood the log, nor block on a full stderr the thread that logs.
class ThrottledLog {
 public:
  explicit ThrottledLog(const char* what) : what_(what) {}
  void Warn(const std::string& line);

 private:
  const char* what_;
  std::mutex mu_;
  double window_start_ = -1e9;
  int logged_ = 0;
  int suppressed_ = 0;
};

}  // namespace bps

#define BPS_LOG(level)                                                       \
  if (::bps::LogLevel::k##level < ::bps::MinLogLevel()) {                    \
  } else                                                                     \
    ::bps::LogMessage(__FILE__, __LINE__, ::bps::LogLevel::k##level).stream()

// CHECK is for broken invariants inside the core, never for user input (that gets a Status).
#define BPS_CHECK(cond)                                                                   \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::bps::LogMessage(__FILE__, __LINE__, ::bps::LogLevel::kFatal).stream()             \
          << "Check failed: " #cond;                                                      \
    }                                                                                     \
  } while (0)

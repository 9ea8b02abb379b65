// Minimal leveled logging to stderr and CHECK macros. BYTEPS_LOG_LEVEL: DEBUG, INFO, WARNING (default), ERROR.
#pragma once

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

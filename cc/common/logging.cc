#include "cc/common/logging.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bps {
namespace {

LogLevel ParseLevel() {
  const char* env = std::getenv("BYTEPS_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kWarning;
  if (!strcasecmp(env, "DEBUG") || !strcmp(env, "0")) return LogLevel::kDebug;
  if (!strcasecmp(env, "INFO") || !strcmp(env, "1")) return LogLevel::kInfo;
  if (!strcasecmp(env, "ERROR") || !strcmp(env, "3")) return LogLevel::kError;
  return LogLevel::kWarning;
}

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
    case LogLevel::kFatal: return "F";
  }
  return "?";
}

}  // namespace

LogLevel MinLogLevel() {
  static const LogLevel level = ParseLevel();
  return level;
}

LogMessage::LogMessage(const char* file, int line, LogLevel level) : level_(level) {
  const char* base = strrchr(file, '/');
  stream_ << "[bps " << LevelTag(level) << " " << getpid() << " " << (base ? base + 1 : file) << ":" << line
          << "] ";
}

LogMessage::~LogMessage() {
  stream_ << "\n";
  std::string text = stream_.str();
  fwrite(text.data(), 1, text.size(), stderr);
  if (level_ == LogLevel::kFatal) {
    fflush(stderr);
    std::abort();
  }
}

}  // namespace bps

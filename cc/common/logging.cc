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

void ThrottledLog::Warn(const std::string& line) {
  using namespace std::chrono;
  const double now = duration<double>(steady_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (now - window_start_ > 60) {
    if (suppressed_ > 0) {
      BPS_LOG(Warning) << suppressed_ << " more " << what_ << " in the last minute, not shown";
    }
    window_start_ = now;
    logged_ = suppressed_ = 0;
  }
  if (logged_++ < 10) {
    BPS_LOG(Warning) << line;
  } else {
    ++suppressed_;
  }
}

std::string Printable(const std::string& text, size_t max_bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace bps

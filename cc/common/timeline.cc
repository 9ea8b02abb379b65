#include "cc/common/timeline.h"

#include <chrono>
#include <cstring>
#include <filesystem>

#include "cc/common/clock.h"

namespace bps {

Timeline& Timeline::OfProcess() {
  static Timeline* timeline = new Timeline();  // never destroyed: spans may be recorded during exit
  return *timeline;
}

Status Timeline::Start(const std::string& path, int rank) {
  Stop();
  std::error_code ignored;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return InvalidArgument("cannot write the timeline to '" + path + "': " + std::strerror(errno));
  }
  std::lock_guard<std::mutex> lock(mu_);
  file_ = file;
  first_event_ = true;
  rank_ = rank;
  rows_.clear();
  steady_origin_ = NowSeconds();
  wall_origin_us_ = std::chrono::duration<double, std::micro>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  // The JSON array format: a trace cut short (a killed process) still loads without its closing bracket.
  std::fputs("[\n", file_);
  Write("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank) +
        ",\"args\":{\"name\":\"worker " + std::to_string(rank) + "\"}}");
  on_.store(true);
  return Status::OK();
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  on_.store(false);
  if (file_ == nullptr) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

void Timeline::Write(const std::string& event) {
  if (!first_event_) std::fputs(",\n", file_);
  first_event_ = false;
  std::fputs(event.c_str(), file_);
}

int Timeline::RowOf(const std::string& tensor) {
  auto found = rows_.find(tensor);
  if (found != rows_.end()) return found->second;
  const int row = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(tensor, row);
  Write("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank_) + ",\"tid\":" + std::to_string(row) +
        ",\"args\":{\"name\":\"" + JsonEscape(tensor) + "\"}}");
  return row;
}

void Timeline::Span(const std::string& tensor, const char* stage, double begin, double end, const std::string& detail) {
  if (!on()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  char times[96];
  std::snprintf(times, sizeof(times), "\"ts\":%.3f,\"dur\":%.3f", wall_origin_us_ + (begin - steady_origin_) * 1e6,
                (end > begin ? end - begin : 0) * 1e6);
  std::string event = "{\"name\":\"" + std::string(stage) + "\",\"cat\":\"bps\",\"ph\":\"X\"," + times +
                      ",\"pid\":" + std::to_string(rank_) + ",\"tid\":" + std::to_string(RowOf(tensor)) +
                      ",\"args\":{\"tensor\":\"" + JsonEscape(tensor) + "\"";
  if (!detail.empty()) event += ",\"detail\":\"" + JsonEscape(detail) + "\"";
  Write(event + "}}");
}

std::string JsonEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace bps

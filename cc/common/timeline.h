// A trace of what a worker does with each tensor, in the Chrome trace format (chrome://tracing, Perfetto's
// UI, scripts/render_timeline.py): one row per tensor, one span per stage (queue, declare, push, the
// server's sum with the pull, copies). Every worker writes its own file.
//
// Off unless started (BYTEPS_TRACE_ON, or start_timeline()); when off, recording costs one atomic load.
#pragma once

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "cc/common/status.h"

namespace bps {

class Timeline {
 public:
  // The process's timeline, shared by the engine and the GPU path.
  static Timeline& OfProcess();

  ~Timeline() { Stop(); }

  // Starts writing to `path` (its directory is created); a trace already being written is completed first.
  // `rank` names the process in the trace.
  Status Start(const std::string& path, int rank);
  // Completes the file. A no-op when off.
  void Stop();
  bool on() const { return on_.load(std::memory_order_relaxed); }

  // Stage `stage` of tensor `tensor` ran from `begin` to `end` (NowSeconds()); `detail` (may be empty) is
  // shown with it, e.g. which partition.
  void Span(const std::string& tensor, const char* stage, double begin, double end, const std::string& detail = "");

 private:
  int RowOf(const std::string& tensor);  // with mu_ held; announces a new row
  void Write(const std::string& event);  // with mu_ held

  std::atomic<bool> on_{false};
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  bool first_event_ = true;
  int rank_ = 0;
  double steady_origin_ = 0;   // NowSeconds() at Start
  double wall_origin_us_ = 0;  // the wall clock then: traces of several workers line up
  std::map<std::string, int> rows_;
};

// Escapes `text` for a JSON string.
std::string JsonEscape(const std::string& text);

}  // namespace bps

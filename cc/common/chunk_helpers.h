// Threads that help with one large loop at a time: Run splits [0, n) into chunks that the calling thread and
// any idle helper take in turns, and returns once every chunk is done. The caller always works too and waits
// only for chunks a helper has already started, so a call never waits on a helper that is busy elsewhere:
// with every helper busy (or none), the caller simply runs all chunks itself. Calls from several threads at
// once are fine; helpers serve them in turn.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace bps {

class ChunkHelpers {
 public:
  explicit ChunkHelpers(int helpers);
  ~ChunkHelpers();
  ChunkHelpers(const ChunkHelpers&) = delete;
  ChunkHelpers& operator=(const ChunkHelpers&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }

  // Calls fn(begin, end) on ranges that cover [0, n) once each. Ranges start at multiples of `align` and
  // are at least `grain` long (except the last): below 2 * grain, fn(0, n) runs here, with no helper.
  void Run(size_t n, size_t grain, size_t align, const std::function<void(size_t, size_t)>& fn);

 private:
  struct Job;
  void Loop();
  static bool TakeChunk(Job& job);  // runs one chunk if any is left; false when none was

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // jobs with chunks nobody has taken yet
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace bps

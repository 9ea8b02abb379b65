#include "cc/common/chunk_helpers.h"

#include <algorithm>
#include <atomic>

namespace bps {

struct ChunkHelpers::Job {
  const std::function<void(size_t, size_t)>* fn;
  size_t n;
  size_t chunk;  // elements per chunk (a multiple of align)
  size_t chunks;
  std::atomic<size_t> next{0};  // the next chunk to take
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;  // chunks finished (under mu)
};

ChunkHelpers::ChunkHelpers(int helpers) {
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { Loop(); });
}

ChunkHelpers::~ChunkHelpers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool ChunkHelpers::TakeChunk(Job& job) {
  const size_t index = job.next.fetch_add(1, std::memory_order_relaxed);
  if (index >= job.chunks) return false;
  const size_t begin = index * job.chunk;
  (*job.fn)(begin, std::min(job.n, begin + job.chunk));
  std::lock_guard<std::mutex> lock(job.mu);
  if (++job.done == job.chunks) job.cv.notify_all();
  return true;
}

void ChunkHelpers::Run(size_t n, size_t grain, size_t align, const std::function<void(size_t, size_t)>& fn) {
  align = std::max<size_t>(align, 1);
  grain = std::max(grain, align);
  if (threads_.empty() || n < 2 * grain) {
    if (n > 0) fn(0, n);
    return;
  }
  // A few chunks per thread, so that a thread that starts late still gets a share.
  const size_t most = 4 * (threads_.size() + 1);
  const size_t wanted = std::min(most, n / grain);
  const size_t per = (n + wanted - 1) / wanted;
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunk = (per + align - 1) / align * align;
  job->chunks = (n + job->chunk - 1) / job->chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
  }
  cv_.notify_all();
  while (TakeChunk(*job)) {
  }
  {
    // Helpers that come later find nothing left; drop the job so they do not look at it.
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
  }
  std::unique_lock<std::mutex> lock(job->mu);
  job->cv.wait(lock, [&] { return job->done == job->chunks; });
}

void ChunkHelpers::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    std::shared_ptr<Job> job = jobs_.front();
    lock.unlock();
    while (TakeChunk(*job)) {
    }
    lock.lock();
    // Every chunk is taken: no helper needs to see the job again.
    jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
  }
}

}  // namespace bps

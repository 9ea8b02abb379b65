#include "cc/transport/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>

namespace bps {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

EventLoop::EventLoop(std::string owner)
    : owner_(std::move(owner)),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

EventLoop::~EventLoop() {
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

Status EventLoop::Start(std::function<void()> loop) {
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Internal(Errno("epoll_create1/eventfd"));
  BPS_RETURN_IF_ERROR(Watch(wake_fd_));
  thread_ = std::thread(std::move(loop));
  return Status::OK();
}

bool EventLoop::Stop(std::function<void()> closing) {
  if (stopping_.exchange(true)) return false;
  if (thread_.joinable()) {
    Post(std::move(closing));
    thread_.join();
  }
  return true;
}

Status EventLoop::Watch(int fd, bool writes) {
  epoll_event ev{};
  ev.events = EPOLLIN | (writes ? EPOLLOUT : 0);
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return Internal(Errno("epoll_ctl"));
  return Status::OK();
}

void EventLoop::Rewatch(int fd, bool writes) {
  epoll_event ev{};
  ev.events = EPOLLIN | (writes ? EPOLLOUT : 0);
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Mute(int fd) {
  epoll_event ev{};
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Unwatch(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

int EventLoop::Wait(epoll_event* events, int max, int timeout_ms) {
  // From here on Post rings: work posted before this store is seen by the check below, work posted after
  // it by a ring (both sides use sequentially consistent atomics; posted_ is read under its mutex).
  sleeping_.store(true);
  if (!nothing_posted()) timeout_ms = 0;
  const int n = epoll_wait(epoll_fd_, events, max, timeout_ms);
  sleeping_.store(false);
  int ready = 0;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd != wake_fd_) {
      events[ready++] = events[i];
      continue;
    }
    uint64_t drained;  // posted work runs at the top of a turn
    ssize_t unused = read(wake_fd_, &drained, sizeof(drained));
    (void)unused;
  }
  return ready;
}

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
  }
  if (!sleeping_.exchange(false)) return;  // the thread is busy and runs it at the top of its next turn
  uint64_t one = 1;
  ssize_t unused = write(wake_fd_, &one, sizeof(one));
  (void)unused;  // the counter cannot overflow in practice; a missed wake-up costs one poll timeout
}

Status EventLoop::RunOnThread(std::function<Status()> fn) {
  if (stopping_) return Aborted("transport is shut down");
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  Post([fn = std::move(fn), done] { done->set_value(fn()); });
  if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    return Internal(owner_ + " did not answer within 60 s");
  }
  return result.get();
}

void EventLoop::RunPosted() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

bool EventLoop::nothing_posted() {
  std::lock_guard<std::mutex> lock(mu_);
  return posted_.empty();
}

void EventLoop::AssertOnThread() const {
  if (std::this_thread::get_id() != thread_.get_id()) DieBecause("transport state touched outside " + owner_);
}

}  // namespace bps

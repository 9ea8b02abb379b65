// A transport's thread (the UCX transport's one, each of the TCP transport's I/O threads). The thread owns
// its state (sockets, UCX's worker), so none of it is locked: other threads post work to it. It sleeps in
// epoll on the file descriptors it watches and on an eventfd that posted work rings, only while the
// thread sleeps: work posted to a busy thread costs no system call.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "cc/common/status.h"

namespace bps {

class EventLoop {
 public:
  // `owner` names the thread in errors ("the TCP transport's thread").
  explicit EventLoop(std::string owner);
  ~EventLoop();  // after Stop()
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs `loop` on the thread; `loop` turns while running() and may finish what is left after it (the
  // thread ends when `loop` returns).
  Status Start(std::function<void()> loop);
  bool running() const { return !exit_; }
  // On the thread: the loop ends after this turn.
  void Exit() { exit_ = true; }

  // Once, from another thread: runs `closing` on the thread, which calls Exit() when it is done (at once or
  // on a later turn), and joins. Returns false when stopped already.
  bool Stop(std::function<void()> closing);
  // Stop() was called: the transport is shut down.
  bool stopping() const { return stopping_; }

  // File descriptors the thread wakes for (from any thread, also before Start): readable, and writable
  // too when `writes`.
  Status Watch(int fd, bool writes = false);
  void Rewatch(int fd, bool writes);
  // Keeps `fd` watched but wakes for nothing on it until Rewatch (a change that cannot fail for lack of
  // memory, as a new Watch could).
  void Mute(int fd);
  void Unwatch(int fd);
  // On the thread: sleeps until a watched descriptor is ready, work is posted, or `timeout_ms` passed.
  // Returns how many of `events` (at most `max`) are watched descriptors; posted work is not among them.
  int Wait(epoll_event* events, int max, int timeout_ms);

  // From any thread: `fn` runs on the thread, in order.
  void Post(std::function<void()> fn);
  // Runs fn on the thread and waits for its result, at most a minute; Aborted once the loop is stopping.
  // fn must capture by value: after a timeout the caller is gone while fn may still run.
  Status RunOnThread(std::function<Status()> fn);
  // On the thread: runs the work posted so far.
  void RunPosted();
  bool nothing_posted();

  // The transport's state belongs to the thread; a call from elsewhere is a bug.
  void AssertOnThread() const;
  bool on_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  const std::string owner_;
  const int epoll_fd_;
  const int wake_fd_;  // rung by Post
  std::thread thread_;
  std::atomic<bool> exit_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> sleeping_{false};  // the thread is in (or entering) epoll_wait: Post rings wake_fd_
  std::mutex mu_;  // guards posted_
  std::deque<std::function<void()>> posted_;
};

}  // namespace bps

// The admission of TCP connections that have not proven they belong to the job (what gloo calls a
// listener): each accepted connection gets the handshake's hello, and must answer with its proof
// (handshake.h) within the handshake timeout; one that does is handed to the transport, one that does not,
// or sends a wrong proof, is closed. Strangers cannot hold places: at most `max_pending` connections
// authenticate at once, and when all places are taken the next connection takes the place of the one that
// has waited longest, once that one has had `grace_s` to finish (a member answers within a round trip).
// Until then the listener accepts nothing: new connections wait in the kernel's queue of the listening
// socket, first come first served.
//
// So strangers that hold every place, and open a connection again whenever one is closed, only join the
// back of that queue: a member waits for the connections ahead of it (at most the socket's backlog), which
// take places at max_pending per grace_s at least (2,560 a second by default). Turning newcomers away
// instead made a member win a place only by chance against the strangers' reopened connections.
//
// Runs on the TCP transport's first I/O thread, which hands admitted connections on (tcp_transport.h).
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "cc/common/logging.h"
#include "cc/transport/event_loop.h"
#include "cc/transport/handshake.h"
#include "cc/transport/job_auth.h"

namespace bps {

class TcpListener {
 public:
  struct Limits {
    size_t max_pending = 128;
    double grace_s = 0.05;
    double handshake_timeout_s = 3;
    // The listening socket's queue, where connections wait while every place is taken, and the length the
    // transport asked for (the kernel caps it at net.core.somaxconn): told when every place is taken.
    int queue_length = 4096;
    int queue_length_wanted = 4096;
  };
  // A connection that proved itself: its socket (watched by the loop already), its peer's address, and
  // whether that peer is on another host.
  using Admit = std::function<void(int fd, const std::string& name)>;
  // Socket options for a new connection (other_host: its peer is on another host).
  using Configure = std::function<void(int fd, bool other_host)>;

  TcpListener(const JobSecret& secret, Limits limits, EventLoop* loop, Admit admit, Configure configure)
      : secret_(secret),
        limits_(limits),
        loop_(loop),
        admit_(std::move(admit)),
        configure_(std::move(configure)) {}

  // Takes the connections waiting on `listen_fd` while there are places for them (all of them, turned away,
  // when `stopping`). When every place is taken and the longest-waiting is still within its grace, the
  // loop stops waking for `listen_fd` until a place comes free or that grace ends (WakeAt).
  void Accept(int listen_fd, bool stopping, double now);
  // Whether `fd` is a connection that is authenticating.
  bool Pending(int fd) const { return by_fd_.count(fd) > 0; }
  size_t pending() const { return by_fd_.size(); }
  // Bytes arrived on pending connection `fd`: its proof, or part of it.
  void OnReadable(int fd);
  // Closes the connections whose handshake timed out; accepts again once the pause of Accept is over.
  void Tick(double now);
  // When Tick should run next to accept again; infinity while accepting.
  double WakeAt() const;
  // Closes every pending connection.
  void CloseAll();

 private:
  struct Unproven {
    int fd;
    std::string name;
    std::unique_ptr<ServerHandshake> handshake;
    double started;
  };
  using Place = std::list<Unproven>::iterator;

  // The connection that has waited longest, which has had its grace, gives its place to a newer one: closed,
  // after taking what it sent (a proof that arrived completes it instead).
  void GiveUpLongestWaitingPlace();
  void Close(Place place);
  // Leaves new connections in the kernel's queue of `listen_fd` until a place comes free or `until`, and back.
  void Pause(int listen_fd, double until);
  void Resume();

  const JobSecret secret_;
  const Limits limits_;
  EventLoop* const loop_;
  const Admit admit_;
  const Configure configure_;
  std::list<Unproven> waiting_;  // the longest-waiting first
  std::map<int, Place> by_fd_;
  int paused_listen_fd_ = -1;  // muted while paused
  double resume_at_ = 0;
  ThrottledLog rejections_{"connections turned away"};
  ThrottledLog full_{"times every place was taken"};
};

}  // namespace bps

#include "cc/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/transport/address.h"
#include "cc/transport/event_loop.h"
#include "cc/transport/handshake.h"
#include "cc/transport/tcp_frames.h"
#include "cc/transport/tcp_listener.h"

namespace bps {
namespace {

// A connection turned away by a full listener (tcp_listener.h) tries again after this. With a grace of half a
// second and a pause of 200 ms, strangers reopening every closed connection kept members out for up to 10 s
// (StrangersReopeningEveryClosedConnectionKeepNoMemberOut).
constexpr int kTurnedAwayPauseMs = 20;
constexpr int kNoListenerPauseMs = 200;
constexpr double kHeartbeatMaxIntervalS = 5;
constexpr double kTickS = 0.1;

TcpListener::Limits ListenerLimits(const TcpOptions& options) {
  TcpListener::Limits limits;
  limits.handshake_timeout_s = options.handshake_timeout_s;
  return limits;
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

class TcpTransport : public Transport, private FrameReader::Sink {
 public:
  explicit TcpTransport(const TcpOptions& options)
      : options_(options),
        listener_(options_.secret, ListenerLimits(options_), &loop_,
                  [this](int fd, const std::string& name, bool other_host) { Admit(fd, name, other_host); },
                  [this](int fd, bool other_host) { ConfigureSocket(fd, other_host); }) {}
  ~TcpTransport() override { Shutdown(1); }

  Status Init();
  void SetHandler(MessageHandler* handler) override { handler_ = handler; }
  StatusOr<std::string> Listen(const std::string& host, int port) override;
  StatusOr<PeerId> Connect(const std::string& address, double timeout_s, Link link) override;
  void Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) override;
  std::string PeerName(PeerId peer) override;
  void Shutdown(double timeout_s) override;

 private:
  struct Connection {
    int fd = -1;
    PeerId id = -1;  // assigned once authenticated
    std::string name;
    bool other_host = false;
    FrameReader reader;
    FrameWriter writer;
    double last_heard = 0;   // anything arrived
    double last_queued = 0;  // anything queued to send
    bool watching_writes = false;
  };

  void Loop();
  void RunCommands();
  void Tick(double now);
  // A connection the listener admitted becomes a peer.
  void Admit(int fd, const std::string& name, bool other_host);
  void OnReadable(Connection* c);
  void Flush(Connection* c);
  void WatchWrites(Connection* c, bool writes);
  PeerId Open(Connection* c);
  void Close(Connection* c, const Status& why);
  void CloseAll();
  void ConfigureSocket(int fd, bool other_host) const;

  // FrameReader::Sink, for the connection being read (current_).
  void* Destination(const std::string& header, size_t length) override;
  void Frame(const std::string& header, void* payload, size_t length) override;

  const TcpOptions options_;
  MessageHandler* handler_ = nullptr;
  std::string local_host_;  // where we listen: peers elsewhere are on other hosts
  int listen_fd_ = -1;
  EventLoop loop_{"the TCP transport's thread"};
  TcpListener listener_;  // the I/O thread's: connections that have not proven they belong to the job

  std::mutex mu_;  // guards names_ (PeerName is called from any thread)
  std::map<PeerId, std::string> names_;

  // The I/O thread's.
  std::map<int, std::unique_ptr<Connection>> connections_;  // by fd
  std::map<PeerId, Connection*> peers_;
  std::set<Connection*> dirty_;  // queued frames to write after the current commands
  Connection* current_ = nullptr;
  PeerId next_peer_ = 0;
  double closing_deadline_ = -1;  // set by Shutdown: flush until then, then close
};

Status TcpTransport::Init() { return loop_.Start([this] { Loop(); }); }

void TcpTransport::RunCommands() {
  loop_.RunPosted();
  std::set<Connection*> dirty;
  dirty.swap(dirty_);
  for (Connection* c : dirty) Flush(c);
}

void TcpTransport::Loop() {
  double next_tick = NowSeconds();
  epoll_event events[64];
  while (loop_.running()) {
    RunCommands();
    int timeout_ms = static_cast<int>(std::max(0.0, next_tick - NowSeconds()) * 1000) + 1;
    int n = loop_.Wait(events, 64, timeout_ms);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        listener_.Accept(listen_fd_, loop_.stopping(), NowSeconds());
        continue;
      }
      if (listener_.Pending(fd)) {
        listener_.OnReadable(fd);
        continue;
      }
      auto it = connections_.find(fd);
      if (it == connections_.end()) continue;
      Connection* c = it->second.get();
      if (events[i].events & EPOLLOUT) Flush(c);
      if (connections_.count(fd) && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) OnReadable(c);
    }
    const double now = NowSeconds();
    if (now >= next_tick) {
      Tick(now);
      next_tick = now + kTickS;
    }
  }
  RunCommands();  // what was posted before the end: sends fail (no connection is left), waits are answered
}

void TcpTransport::Tick(double now) {
  const double heartbeat = std::min(kHeartbeatMaxIntervalS, options_.liveness_timeout_s / 4);
  std::vector<Connection*> all;
  for (auto& entry : connections_) all.push_back(entry.second.get());
  listener_.Tick(now);
  for (Connection* c : all) {
    if (now - c->last_heard > options_.liveness_timeout_s) {
      Close(c, Unavailable("no sign of life from " + c->name + " for " +
                           std::to_string(static_cast<int>(options_.liveness_timeout_s)) +
                           " s (BYTEPS_TIMEOUT): the process is frozen or the network is cut"));
      continue;
    }
    if (now - c->last_queued > heartbeat && c->writer.empty()) {
      c->writer.QueueHeartbeat();
      c->last_queued = now;
      Flush(c);
    }
  }
  if (closing_deadline_ >= 0) {
    bool flushed = true;
    for (auto& entry : connections_) flushed &= entry.second->writer.empty();
    if (flushed || now >= closing_deadline_) {
      CloseAll();
      loop_.Exit();
    }
  }
}

void TcpTransport::ConfigureSocket(int fd, bool other_host) const {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (other_host && options_.send_buffer_bytes > 0) {
    int bytes = static_cast<int>(options_.send_buffer_bytes);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  }
}

StatusOr<std::string> TcpTransport::Listen(const std::string& host, int port) {
  sockaddr_in addr;
  if (!Ipv4SocketAddress(host, port, &addr)) {
    return InvalidArgument("'" + host + "' is not an IPv4 address to listen on");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(Errno("socket"));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 512) != 0) {
    Status error = Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " + std::strerror(errno));
    close(fd);
    return error;
  }
  socklen_t length = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  const std::string bound = host + ":" + std::to_string(ntohs(addr.sin_port));
  local_host_ = host;  // read by Connect, which the same thread calls after this
  Status added = loop_.RunOnThread([this, fd]() -> Status {
    BPS_RETURN_IF_ERROR(loop_.Watch(fd));
    listen_fd_ = fd;
    return Status::OK();
  });
  if (!added.ok()) {
    close(fd);
    return added;
  }
  return bound;
}

void TcpTransport::Admit(int fd, const std::string& name, bool other_host) {
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->name = name;
  c->other_host = other_host;
  Connection* raw = c.get();
  connections_[fd] = std::move(c);
  Open(raw);
}

PeerId TcpTransport::Open(Connection* c) {
  loop_.AssertOnThread();
  c->id = next_peer_++;
  c->last_heard = c->last_queued = NowSeconds();
  peers_[c->id] = c;
  std::lock_guard<std::mutex> lock(mu_);
  names_[c->id] = c->name;
  return c->id;
}

StatusOr<PeerId> TcpTransport::Connect(const std::string& address, double timeout_s, Link) {
  auto target = ParseHostPort(address);
  if (!target.ok()) return target.status();
  sockaddr_in addr;
  if (!Ipv4SocketAddress(target.value().host, target.value().port, &addr)) {
    return InvalidArgument("'" + target.value().host + "' is not an IPv4 address");
  }
  const bool other_host = target.value().host != local_host_;
  Deadline deadline(timeout_s);
  Status last = Unavailable("no attempt made");
  while (!deadline.expired()) {
    if (loop_.stopping()) return Aborted("transport is shut down");
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return Internal(Errno("socket"));
    ConfigureSocket(fd, other_host);
    Deadline attempt(std::min(deadline.remaining(), options_.handshake_timeout_s));
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, static_cast<int>(attempt.remaining() * 1000) + 1) == 1 ? 0 : -1;
      int error = 0;
      socklen_t length = sizeof(error);
      if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error != 0) {
        errno = error;
        rc = -1;
      } else if (rc != 0) {
        errno = ETIMEDOUT;
      }
    }
    Status step = rc == 0 ? RunClientHandshake(fd, options_.secret, attempt)
                          : Unavailable(std::string("connect: ") + std::strerror(errno));
    if (step.ok()) {
      auto id = std::make_shared<PeerId>(-1);
      const std::string name = address;
      Status opened = loop_.RunOnThread([this, fd, name, other_host, id]() -> Status {
        auto c = std::make_unique<Connection>();
        c->fd = fd;
        c->name = name;
        c->other_host = other_host;
        BPS_RETURN_IF_ERROR(loop_.Watch(fd));
        Connection* raw = c.get();
        connections_[fd] = std::move(c);
        *id = Open(raw);
        return Status::OK();
      });
      if (opened.ok()) return *id;
      close(fd);
      return opened;
    }
    close(fd);
    // Not a member of this job: trying again will not change that.
    if (step.code() == Code::kUnauthenticated) return Unauthenticated(address + ": " + step.message());
    last = step;
    // Turned away by a listener whose places for handshakes were all taken: another attempt may get one. No
    // listener yet: it is still starting.
    const int pause_ms = rc == 0 ? kTurnedAwayPauseMs : kNoListenerPauseMs;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int>(pause_ms, deadline.remaining() * 1000)));
  }
  return Unavailable("cannot connect to " + address + " within " + std::to_string(static_cast<int>(timeout_s)) +
                     " s (last error: " + last.message() + "). Is the process there running?");
}

void TcpTransport::Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) {
  if (loop_.stopping()) {
    if (on_sent) on_sent(Aborted("transport is shut down"));
    return;
  }
  auto queue = [this, to, header = std::move(header), payload, length, on_sent = std::move(on_sent)]() mutable {
    auto it = peers_.find(to);
    if (it == peers_.end()) {
      if (on_sent) on_sent(Unavailable("connection to " + PeerName(to) + " is closed"));
      return;
    }
    Connection* c = it->second;
    c->writer.Queue(header, payload, length, std::move(on_sent));
    c->last_queued = NowSeconds();
    dirty_.insert(c);
  };
  // A reply sent from a message handler (on this thread) is queued at once and written with the others
  // after the current reads. A send that fails is answered later, as from any thread: the caller may hold
  // a lock its callback takes.
  if (loop_.on_thread() && peers_.count(to)) return queue();
  loop_.Post(std::move(queue));
}

void TcpTransport::Flush(Connection* c) {
  if (!connections_.count(c->fd) || connections_[c->fd].get() != c) return;  // closed meanwhile
  Status written = c->writer.WriteTo(c->fd);
  if (!written.ok()) return Close(c, Unavailable("connection to " + c->name + " lost (" + written.message() + ")"));
  WatchWrites(c, !c->writer.empty());
}

void TcpTransport::WatchWrites(Connection* c, bool writes) {
  if (c->watching_writes == writes) return;
  loop_.Rewatch(c->fd, writes);
  c->watching_writes = writes;
}

void TcpTransport::OnReadable(Connection* c) {
  current_ = c;
  const int fd = c->fd;
  Status read = c->reader.ReadFrom(fd, *this);
  current_ = nullptr;
  if (!connections_.count(fd)) return;
  c->last_heard = NowSeconds();
  if (!read.ok()) Close(c, Unavailable("connection to " + c->name + " lost (" + read.message() + ")"));
}

void* TcpTransport::Destination(const std::string& header, size_t length) {
  if (handler_ == nullptr || loop_.stopping()) return nullptr;
  return handler_->PayloadDestination(current_->id, header, length);
}

void TcpTransport::Frame(const std::string& header, void* payload, size_t length) {
  if (handler_ != nullptr && !loop_.stopping()) handler_->OnMessage(current_->id, header, payload, length);
}

void TcpTransport::Close(Connection* c, const Status& why) {
  loop_.AssertOnThread();
  loop_.Unwatch(c->fd);
  close(c->fd);
  c->writer.FailAll(why);
  dirty_.erase(c);
  const PeerId id = c->id;
  const bool was_open = id >= 0;
  auto owned = std::move(connections_[c->fd]);
  connections_.erase(c->fd);
  if (was_open) peers_.erase(id);
  if (was_open && handler_ != nullptr && !loop_.stopping()) handler_->OnPeerLost(id, why);
}

void TcpTransport::CloseAll() {
  std::vector<Connection*> all;
  for (auto& entry : connections_) all.push_back(entry.second.get());
  for (Connection* c : all) Close(c, Aborted("transport is shut down"));
  listener_.CloseAll();
  if (listen_fd_ >= 0) {
    loop_.Unwatch(listen_fd_);
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

std::string TcpTransport::PeerName(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(peer);
  return it == names_.end() ? "unknown peer" : it->second;
}

void TcpTransport::Shutdown(double timeout_s) {
  loop_.Stop([this, timeout_s] { closing_deadline_ = NowSeconds() + timeout_s; });
}

}  // namespace

StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TcpOptions& options) {
  auto transport = std::make_unique<TcpTransport>(options);
  BPS_RETURN_IF_ERROR(transport->Init());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace bps

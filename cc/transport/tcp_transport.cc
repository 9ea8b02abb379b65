#include "cc/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/transport/address.h"
#include "cc/transport/handler_turns.h"
#include "cc/transport/handshake.h"
#include "cc/transport/tcp_io_thread.h"
#include "cc/transport/tcp_listener.h"

namespace bps {
namespace {

// A connection closed during the handshake (by a listener shutting down, or one that gave its place to a
// newer connection after the grace: tcp_listener.h) tries again after this.
constexpr int kTurnedAwayPauseMs = 20;
constexpr int kNoListenerPauseMs = 200;
// Connections wait in the listening socket's queue while every place for a handshake is taken (tcp_listener.h):
// a long queue holds a flood of strangers' connections, where a full one would drop a member's first packet
// (sent again only a second later). The kernel caps it at net.core.somaxconn. A full queue empties in 1.6 s
// (4096 at 2,560 places a second), well within a connection attempt's handshake timeout.
constexpr int kListenBacklog = 4096;

// The listening socket's queue as the kernel gives it: kListenBacklog, capped at net.core.somaxconn.
int ListenQueueLength() {
  std::FILE* file = std::fopen("/proc/sys/net/core/somaxconn", "r");
  if (file == nullptr) return kListenBacklog;
  int somaxconn = 0;
  const bool read = std::fscanf(file, "%d", &somaxconn) == 1;
  std::fclose(file);
  return read && somaxconn > 0 ? std::min(somaxconn, kListenBacklog) : kListenBacklog;
}

TcpListener::Limits ListenerLimits(const TcpOptions& options) {
  TcpListener::Limits limits;
  limits.handshake_timeout_s = options.handshake_timeout_s;
  limits.queue_length = ListenQueueLength();
  limits.queue_length_wanted = kListenBacklog;
  return limits;
}

std::vector<std::unique_ptr<TcpIoThread>> MakeThreads(const TcpOptions& options, HandlerTurns* handler,
                                                      const std::atomic<bool>* stopping) {
  const int count = std::max(1, options.io_threads);
  std::vector<std::unique_ptr<TcpIoThread>> threads;
  for (int i = 0; i < count; ++i) {
    threads.push_back(std::make_unique<TcpIoThread>(options, handler, stopping, i, count));
  }
  return threads;
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The transport's face: where connections come from (the listener, on the first I/O thread, and Connect)
// and which I/O thread owns each (round robin); sends go to the owner's thread.
class TcpTransport : public Transport, private TcpIoThread::Guest {
 public:
  explicit TcpTransport(const TcpOptions& options)
      : options_(options),
        handler_(options_.io_threads > 1),
        threads_(MakeThreads(options_, &handler_, &stopping_)),
        listener_(options_.secret, ListenerLimits(options_), &threads_[0]->loop(),
                  [this](int fd, const std::string& name) { Admit(fd, name); },
                  [this](int fd, bool other_host) { ConfigureSocket(fd, other_host); }) {}
  ~TcpTransport() override { Shutdown(1); }

  Status Init();
  void SetHandler(MessageHandler* handler) override { handler_.Set(handler); }
  StatusOr<std::string> Listen(const std::string& host, int port) override;
  StatusOr<PeerId> Connect(const std::string& address, double timeout_s, Link link) override;
  void Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) override;
  std::string PeerName(PeerId peer) override { return Owner(peer).PeerName(peer); }
  void Shutdown(double timeout_s) override;

 private:
  // The listener's thread, and where every I/O thread comes from.
  EventLoop& listener_loop() { return threads_[0]->loop(); }
  TcpIoThread& Owner(PeerId peer) { return *threads_[peer >= 0 ? peer % threads_.size() : 0]; }
  TcpIoThread& NextThread() { return *threads_[next_thread_++ % threads_.size()]; }
  // A connection the listener admitted (on the first thread) becomes a peer of the next thread.
  void Admit(int fd, const std::string& name);
  void ConfigureSocket(int fd, bool other_host) const;

  // TcpIoThread::Guest: the listener's descriptors, on the first thread.
  bool OnReady(int fd) override;
  void Tick(double now) override { listener_.Tick(now); }
  double WakeAt() const override { return listener_.WakeAt(); }
  void CloseAll() override;

  const TcpOptions options_;
  // Declared before the threads, which use them until they are joined.
  HandlerTurns handler_;
  // Send and Admit hand work to a thread only while not stopping_ (under a shared lock), and Shutdown sets
  // it (exclusively) before any thread stops: what they hand over is there before the thread's last turn.
  std::shared_mutex stopping_mu_;
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<TcpIoThread>> threads_;
  TcpListener listener_;  // the first thread's: connections that have not proven they belong to the job
  std::string local_host_;  // where we listen: peers elsewhere are on other hosts
  int listen_fd_ = -1;      // the first thread's
  std::atomic<unsigned> next_thread_{0};
};

Status TcpTransport::Init() {
  BPS_RETURN_IF_ERROR(threads_[0]->Start(this));
  for (size_t i = 1; i < threads_.size(); ++i) BPS_RETURN_IF_ERROR(threads_[i]->Start(nullptr));
  return Status::OK();
}

bool TcpTransport::OnReady(int fd) {
  if (fd == listen_fd_) {
    listener_.Accept(listen_fd_, stopping_, NowSeconds());
    return true;
  }
  if (!listener_.Pending(fd)) return false;
  listener_.OnReadable(fd);
  return true;
}

void TcpTransport::CloseAll() {
  listener_.CloseAll();
  if (listen_fd_ >= 0) {
    listener_loop().Unwatch(listen_fd_);
    close(listen_fd_);
    listen_fd_ = -1;
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
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, kListenBacklog) != 0) {
    Status error = Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " + std::strerror(errno));
    close(fd);
    return error;
  }
  socklen_t length = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  const std::string bound = host + ":" + std::to_string(ntohs(addr.sin_port));
  local_host_ = host;  // read by Connect, which the same thread calls after this
  Status added = listener_loop().RunOnThread([this, fd]() -> Status {
    BPS_RETURN_IF_ERROR(listener_loop().Watch(fd));
    listen_fd_ = fd;
    return Status::OK();
  });
  if (!added.ok()) {
    close(fd);
    return added;
  }
  return bound;
}

void TcpTransport::Admit(int fd, const std::string& name) {
  TcpIoThread& owner = NextThread();
  if (&owner == threads_[0].get()) {
    owner.AdoptHere(fd, name);
    return;
  }
  listener_loop().Unwatch(fd);  // the owner watches it from now on (bytes that came meanwhile wait there)
  std::shared_lock<std::shared_mutex> lock(stopping_mu_);
  if (stopping_) {
    close(fd);
    return;
  }
  owner.AdoptLater(fd, name);
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
    if (stopping_) return Aborted("transport is shut down");
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
      // Under the shared lock, as Send and Admit: a thread that Shutdown has not begun to stop runs the
      // adoption, where one stopping between a check and the hand-over would leave it waiting unanswered.
      std::shared_lock<std::shared_mutex> lock(stopping_mu_);
      auto id = stopping_ ? StatusOr<PeerId>(Aborted("transport is shut down")) : NextThread().Adopt(fd, address);
      if (!id.ok()) close(fd);
      return id;
    }
    close(fd);
    // Not a member of this job: trying again will not change that.
    if (step.code() == Code::kUnauthenticated) return Unauthenticated(address + ": " + step.message());
    last = step;
    // Turned away during the handshake: another attempt may be admitted. No listener yet: it is still
    // starting.
    const int pause_ms = rc == 0 ? kTurnedAwayPauseMs : kNoListenerPauseMs;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int>(pause_ms, deadline.remaining() * 1000)));
  }
  return Unavailable("cannot connect to " + address + " within " + std::to_string(static_cast<int>(timeout_s)) +
                     " s (last error: " + last.message() + "). Is the process there running?");
}

void TcpTransport::Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) {
  std::shared_lock<std::shared_mutex> lock(stopping_mu_);
  if (stopping_) {
    lock.unlock();
    if (on_sent) on_sent(Aborted("transport is shut down"));
    return;
  }
  Owner(to).Send(to, std::move(header), payload, length, std::move(on_sent));
}

void TcpTransport::Shutdown(double timeout_s) {
  {
    std::unique_lock<std::shared_mutex> lock(stopping_mu_);
    if (stopping_.exchange(true)) return;
  }
  // Every thread flushes within the same timeout: they stop side by side.
  std::vector<std::thread> stoppers;
  for (size_t i = 1; i < threads_.size(); ++i) {
    stoppers.emplace_back([thread = threads_[i].get(), timeout_s] { thread->Stop(timeout_s); });
  }
  threads_[0]->Stop(timeout_s);
  for (std::thread& stopper : stoppers) stopper.join();
}

}  // namespace

StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TcpOptions& options) {
  auto transport = std::make_unique<TcpTransport>(options);
  BPS_RETURN_IF_ERROR(transport->Init());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace bps

#include "cc/transport/tcp_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

namespace bps {
namespace {

// After accept failed for want of descriptors or memory, the listener tries again this much later.
constexpr double kRetryAcceptS = 0.1;

std::string Describe(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

}  // namespace

void TcpListener::Accept(int listen_fd, bool stopping, double now) {
  while (true) {
    const bool full = by_fd_.size() >= limits_.max_pending;
    if (!stopping && full && !waiting_.empty() && now - waiting_.front().started < limits_.grace_s) {
      return Pause(listen_fd, waiting_.front().started + limits_.grace_s);
    }
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // none left
      // Out of descriptors or memory: the connection stays queued; the socket, still readable, would wake
      // the thread at once.
      rejections_.Warn(std::string("cannot accept a connection for now: ") + std::strerror(errno));
      return Pause(listen_fd, now + kRetryAcceptS);
    }
    const std::string name = Describe(peer);
    if (stopping) {
      rejections_.Warn("turned away a connection from " + name + ": shutting down");
      close(fd);
      continue;
    }
    if (full) GiveUpLongestWaitingPlace();
    sockaddr_in mine{};
    length = sizeof(mine);
    getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &length);
    const bool other_host = peer.sin_addr.s_addr != mine.sin_addr.s_addr;
    auto handshake = std::make_unique<ServerHandshake>(secret_);
    configure_(fd, other_host);
    const std::string& hello = handshake->hello();
    // A fresh socket's buffer takes these 40 bytes whole.
    if (send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size()) ||
        !loop_->Watch(fd).ok()) {
      close(fd);
      continue;
    }
    by_fd_[fd] = waiting_.insert(waiting_.end(), Unproven{fd, name, std::move(handshake), now});
  }
}

void TcpListener::GiveUpLongestWaitingPlace() {
  if (waiting_.empty()) return;
  // Its proof may have arrived unread: take it first (admitted, or closed for a wrong one).
  const int fd = waiting_.front().fd;
  OnReadable(fd);
  auto still = by_fd_.find(fd);
  if (still == by_fd_.end()) return;
  rejections_.Warn("turned away a connection from " + still->second->name + ": it did not complete the "
                   "handshake, and a newer connection needed its place");
  Close(still->second);
}

void TcpListener::OnReadable(int fd) {
  auto found = by_fd_.find(fd);
  if (found == by_fd_.end()) return;
  const Place place = found->second;
  char bytes[kClientProofBytes + 1];
  ssize_t n = recv(fd, bytes, sizeof(bytes), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) return Close(place);  // closed during the handshake
  std::string reply, why;
  switch (place->handshake->Feed(bytes, static_cast<size_t>(n), &reply, &why)) {
    case ServerHandshake::Result::kNeedMore: return;
    case ServerHandshake::Result::kRejected:
      rejections_.Warn("turned away a connection from " + place->name + ": " + why);
      send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);  // best effort: the peer learns why it failed
      return Close(place);
    case ServerHandshake::Result::kAccepted: {
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(reply.size())) {
        return Close(place);  // closed during the handshake
      }
      const std::string name = place->name;
      by_fd_.erase(fd);
      waiting_.erase(place);
      Resume();
      admit_(fd, name);
    }
  }
}

void TcpListener::Pause(int listen_fd, double until) {
  resume_at_ = until;
  if (paused_listen_fd_ >= 0) return;
  if (by_fd_.size() >= limits_.max_pending) {
    std::string message = "all " + std::to_string(limits_.max_pending) + " places for connections that have not "
                          "yet proven the job's secret are taken: new connections wait their turn, " +
                          std::to_string(limits_.queue_length) + " at most";
    if (limits_.queue_length < limits_.queue_length_wanted) {
      // Beyond the queue the kernel drops a new connection's first packet, and a member waits a second or more.
      message += " (net.core.somaxconn caps the queue: raise it, e.g. sysctl -w net.core.somaxconn=" +
                 std::to_string(limits_.queue_length_wanted) + ", where strangers can reach this port)";
    }
    full_.Warn(message);
  }
  loop_->Mute(listen_fd);
  paused_listen_fd_ = listen_fd;
}

void TcpListener::Resume() {
  if (paused_listen_fd_ < 0) return;
  loop_->Rewatch(paused_listen_fd_, /*writes=*/false);
  paused_listen_fd_ = -1;
}

double TcpListener::WakeAt() const {
  return paused_listen_fd_ >= 0 ? resume_at_ : std::numeric_limits<double>::infinity();
}

void TcpListener::Tick(double now) {
  std::vector<Place> expired;
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (now > it->started + limits_.handshake_timeout_s) expired.push_back(it);
  }
  for (Place place : expired) {
    rejections_.Warn("turned away a connection from " + place->name + ": it did not complete the handshake within " +
                     std::to_string(static_cast<int>(limits_.handshake_timeout_s)) + " s");
    Close(place);
  }
  if (paused_listen_fd_ >= 0 && now >= resume_at_) Resume();
}

void TcpListener::CloseAll() {
  while (!waiting_.empty()) Close(waiting_.begin());
  paused_listen_fd_ = -1;  // the transport closes it (Close resumed it already, unless it held no place)
}

void TcpListener::Close(Place place) {
  loop_->Unwatch(place->fd);
  close(place->fd);
  by_fd_.erase(place->fd);
  waiting_.erase(place);
  Resume();
}

}  // namespace bps

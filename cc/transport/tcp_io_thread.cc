#include "cc/transport/tcp_io_thread.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "cc/common/clock.h"

namespace bps {
namespace {

constexpr double kHeartbeatMaxIntervalS = 5;
constexpr double kTickS = 0.1;

std::string ThreadName(int index, int count) {
  if (count == 1) return "the TCP transport's thread";
  return "the TCP transport's I/O thread " + std::to_string(index);
}

}  // namespace

TcpIoThread::TcpIoThread(const TcpOptions& options, HandlerTurns* handler,
                         const std::atomic<bool>* transport_stopping, int index, int count)
    : options_(options),
      handler_(handler),
      transport_stopping_(transport_stopping),
      index_(index),
      count_(count),
      loop_(ThreadName(index, count)) {}

TcpIoThread::~TcpIoThread() { Stop(1); }

Status TcpIoThread::Start(Guest* guest) {
  guest_ = guest;
  return loop_.Start([this] { Loop(); });
}

void TcpIoThread::RunCommands() {
  loop_.RunPosted();
  std::set<Connection*> dirty;
  dirty.swap(dirty_);
  for (Connection* c : dirty) Flush(c);
}

void TcpIoThread::Loop() {
  double next_tick = NowSeconds();
  epoll_event events[64];
  while (loop_.running()) {
    RunCommands();
    const double wake = guest_ != nullptr ? std::min(next_tick, guest_->WakeAt()) : next_tick;
    int timeout_ms = static_cast<int>(std::max(0.0, wake - NowSeconds()) * 1000) + 1;
    int n = loop_.Wait(events, 64, timeout_ms);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      auto it = connections_.find(fd);
      if (it == connections_.end()) {
        if (guest_ != nullptr) guest_->OnReady(fd);
        continue;
      }
      Connection* c = it->second.get();
      if (events[i].events & EPOLLOUT) Flush(c);
      if (connections_.count(fd) && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) OnReadable(c);
    }
    const double now = NowSeconds();
    if (now >= next_tick) {
      Tick(now);
      next_tick = now + kTickS;
    } else if (guest_ != nullptr && now >= guest_->WakeAt()) {
      guest_->Tick(now);
    }
  }
  RunCommands();  // what was posted before the end: sends fail (no connection is left), waits are answered
}

void TcpIoThread::Tick(double now) {
  const double heartbeat = std::min(kHeartbeatMaxIntervalS, options_.liveness_timeout_s / 4);
  std::vector<Connection*> all;
  for (auto& entry : connections_) all.push_back(entry.second.get());
  if (guest_ != nullptr) guest_->Tick(now);
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

PeerId TcpIoThread::Open(int fd, const std::string& name) {
  loop_.AssertOnThread();
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->id = index_ + count_ * opened_++;
  c->name = name;
  c->last_heard = c->last_queued = NowSeconds();
  peers_[c->id] = c.get();
  const PeerId id = c->id;
  connections_[fd] = std::move(c);
  std::lock_guard<std::mutex> lock(mu_);
  names_[id] = name;
  return id;
}

PeerId TcpIoThread::AdoptHere(int fd, const std::string& name) { return Open(fd, name); }

StatusOr<PeerId> TcpIoThread::Adopt(int fd, const std::string& name) {
  auto id = std::make_shared<PeerId>(-1);
  Status opened = loop_.RunOnThread([this, fd, name, id]() -> Status {
    if (closed_) return Aborted("transport is shut down");
    BPS_RETURN_IF_ERROR(loop_.Watch(fd));
    *id = Open(fd, name);
    return Status::OK();
  });
  if (!opened.ok()) return opened;
  return *id;
}

void TcpIoThread::AdoptLater(int fd, const std::string& name) {
  loop_.Post([this, fd, name] {
    if (closed_ || !loop_.Watch(fd).ok()) {
      close(fd);
      return;
    }
    Open(fd, name);
  });
}

void TcpIoThread::Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) {
  auto queue = [this, to, header = std::move(header), payload, length,
                on_sent = handler_->Wrap(std::move(on_sent))]() mutable {
    auto it = peers_.find(to);
    if (it == peers_.end()) {
      if (on_sent) on_sent(Unavailable("connection to " + PeerName(to) + " is closed"));
      return;
    }
    Connection* c = it->second;
    c->writer.Queue(std::move(header), payload, length, std::move(on_sent));
    c->last_queued = NowSeconds();
    dirty_.insert(c);
  };
  // A reply sent from a message handler (on this thread) is queued at once and written with the others
  // after the current reads. A send that fails is answered later, as from any thread: the caller may hold
  // a lock its callback takes.
  if (loop_.on_thread() && peers_.count(to)) return queue();
  loop_.Post(std::move(queue));
}

void TcpIoThread::Flush(Connection* c) {
  if (!connections_.count(c->fd) || connections_[c->fd].get() != c) return;  // closed meanwhile
  Status written = c->writer.WriteTo(c->fd);
  if (!written.ok()) return Close(c, Unavailable("connection to " + c->name + " lost (" + written.message() + ")"));
  WatchWrites(c, !c->writer.empty());
}

void TcpIoThread::WatchWrites(Connection* c, bool writes) {
  if (c->watching_writes == writes) return;
  loop_.Rewatch(c->fd, writes);
  c->watching_writes = writes;
}

void TcpIoThread::OnReadable(Connection* c) {
  current_ = c;
  const int fd = c->fd;
  Status read = c->reader.ReadFrom(fd, *this);
  current_ = nullptr;
  if (!connections_.count(fd)) return;
  c->last_heard = NowSeconds();
  if (!read.ok()) Close(c, Unavailable("connection to " + c->name + " lost (" + read.message() + ")"));
}

void* TcpIoThread::Destination(const std::string& header, size_t length) {
  if (*transport_stopping_) return nullptr;
  return handler_->PayloadDestination(current_->id, header, length);
}

void TcpIoThread::Frame(const std::string& header, void* payload, size_t length) {
  if (!*transport_stopping_) handler_->OnMessage(current_->id, header, payload, length);
}

void TcpIoThread::Close(Connection* c, const Status& why) {
  loop_.AssertOnThread();
  loop_.Unwatch(c->fd);
  close(c->fd);
  dirty_.erase(c);
  const PeerId id = c->id;
  auto owned = std::move(connections_[c->fd]);
  connections_.erase(c->fd);
  peers_.erase(id);
  // After the peer is gone: a failed send's callback that sends to it again is answered as closed, rather
  // than queued on this connection, which nothing would write or fail any more.
  owned->writer.FailAll(why);
  if (!*transport_stopping_) handler_->OnPeerLost(id, why);
}

void TcpIoThread::CloseAll() {
  std::vector<Connection*> all;
  for (auto& entry : connections_) all.push_back(entry.second.get());
  for (Connection* c : all) Close(c, Aborted("transport is shut down"));
  if (guest_ != nullptr) guest_->CloseAll();
  closed_ = true;
}

std::string TcpIoThread::PeerName(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(peer);
  return it == names_.end() ? "unknown peer" : it->second;
}

void TcpIoThread::Stop(double timeout_s) {
  loop_.Stop([this, timeout_s] { closing_deadline_ = NowSeconds() + timeout_s; });
}

}  // namespace bps

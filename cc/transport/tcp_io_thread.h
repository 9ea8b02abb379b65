// One of the TCP transport's I/O threads and the connections it owns (tcp_transport.h spreads a process's
// connections over several, so that its traffic is not bound by one core): it reads and writes their
// frames, sends heartbeats on idle ones, reports silent ones lost, and fails what is queued on one that
// closes. Its state is its thread's (event_loop.h); other threads hand it work through Adopt and Send.
//
// Peer ids tell their thread: thread `index` of `count` numbers its connections index, index + count, ...
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "cc/transport/event_loop.h"
#include "cc/transport/handler_turns.h"
#include "cc/transport/tcp_frames.h"
#include "cc/transport/tcp_transport.h"

namespace bps {

class TcpIoThread : private FrameReader::Sink {
 public:
  // Descriptors the thread watches for someone else: the listener's, on the first thread.
  class Guest {
   public:
    virtual ~Guest() = default;
    // `fd` is ready; false when it is not the guest's.
    virtual bool OnReady(int fd) = 0;
    // Every tick of the thread, and at WakeAt() when that comes earlier.
    virtual void Tick(double now) = 0;
    // When Tick must run next, if earlier than the thread's own tick; infinity for no earlier.
    virtual double WakeAt() const = 0;
    // The thread is closing: close every descriptor.
    virtual void CloseAll() = 0;
  };

  // `transport_stopping`: the transport is shutting down; the handler hears nothing more from then on.
  TcpIoThread(const TcpOptions& options, HandlerTurns* handler, const std::atomic<bool>* transport_stopping,
              int index, int count);
  ~TcpIoThread();  // after Stop()

  // `guest` (may be null) must be set before Start.
  Status Start(Guest* guest);
  EventLoop& loop() { return loop_; }

  // Makes `fd`, an authenticated socket, a peer of this thread; returns its id. From any thread but this one.
  StatusOr<PeerId> Adopt(int fd, const std::string& name);
  // The same, posted (from the listener on another thread): `fd` is closed if this thread closes first.
  void AdoptLater(int fd, const std::string& name);
  // On this thread: the same, for a socket the loop watches already (the listener's).
  PeerId AdoptHere(int fd, const std::string& name);

  // As Transport::Send, for a peer of this thread; the caller has checked that the transport is not shut
  // down (a failure on a stopped thread could be lost).
  void Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent);
  // Thread-safe.
  std::string PeerName(PeerId peer);

  // Flushes what can be flushed within `timeout_s`, closes every connection (each queued frame's on_sent
  // runs), and joins the thread. Idempotent.
  void Stop(double timeout_s);

 private:
  struct Connection {
    int fd = -1;
    PeerId id = -1;
    std::string name;
    FrameReader reader;
    FrameWriter writer;
    double last_heard = 0;   // anything arrived
    double last_queued = 0;  // anything queued to send
    bool watching_writes = false;
  };

  void Loop();
  void RunCommands();
  void Tick(double now);
  PeerId Open(int fd, const std::string& name);
  void OnReadable(Connection* c);
  void Flush(Connection* c);
  void WatchWrites(Connection* c, bool writes);
  void Close(Connection* c, const Status& why);
  void CloseAll();

  // FrameReader::Sink, for the connection being read (current_).
  void* Destination(const std::string& header, size_t length) override;
  void Frame(const std::string& header, void* payload, size_t length) override;

  const TcpOptions& options_;
  HandlerTurns* const handler_;
  const std::atomic<bool>* const transport_stopping_;
  const int index_, count_;
  EventLoop loop_;
  Guest* guest_ = nullptr;

  std::mutex mu_;  // guards names_ (PeerName is called from any thread)
  std::map<PeerId, std::string> names_;

  // The thread's.
  std::map<int, std::unique_ptr<Connection>> connections_;  // by fd
  std::map<PeerId, Connection*> peers_;
  std::set<Connection*> dirty_;  // queued frames to write after the current commands
  Connection* current_ = nullptr;
  PeerId opened_ = 0;             // connections opened so far
  double closing_deadline_ = -1;  // set by Stop: flush until then, then close
  bool closed_ = false;           // CloseAll ran: sockets handed over later are closed at once
};

}  // namespace bps

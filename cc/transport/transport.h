// The small messaging interface the parameter-server code is written against.
//
// A message is a header (small bytes, parsed by the receiver) plus an optional payload (tensor bytes).
// The receiver chooses where a payload lands before it is transferred, so large payloads move straight
// into their final buffer (UCX rendezvous) instead of through a staging copy.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cc/common/status.h"

namespace bps {

using PeerId = int;  // a connection, numbered by the transport that owns it

// What a connection carries, which decides how its loss is noticed.
// kControl: the transport watches it and reports a dead peer through OnPeerLost at once.
// kData: tensor bytes. Between processes of one host it may go through shared memory, which UCX can only
// use on connections it does not watch (UCX drops its shared-memory transports from endpoints with peer
// error handling). A dead peer on such a link is reported by the control connection instead (the
// scheduler's ABORT); between hosts a data link is watched like a control link.
enum class Link { kControl, kData };

// Called on a transport thread: keep handlers short, hand heavy work to other threads. A transport may have
// several (the TCP transport's I/O threads), but its callbacks, on_sent's included, take turns: one runs at
// a time (handler_turns.h), so a handler needs no lock against itself, only against its other threads.
class MessageHandler {
 public:
  virtual ~MessageHandler() = default;
  // Where `length` (> 0) payload bytes of this message should be written. Returning nullptr drops the
  // payload; OnMessage is then called with payload == nullptr.
  virtual void* PayloadDestination(PeerId from, const std::string& header, size_t length) = 0;
  // The whole message has arrived (payload, if any, at the destination chosen above).
  virtual void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) = 0;
  // The connection broke: the peer died or closed it. No further messages arrive from it.
  virtual void OnPeerLost(PeerId peer, const Status& why) = 0;
};

// Runs when the payload buffer may be reused; status says whether the send failed.
using SendCallback = std::function<void(const Status&)>;

class Transport {
 public:
  virtual ~Transport() = default;

  // Must be called before Listen/Connect; the handler outlives the transport's Shutdown().
  virtual void SetHandler(MessageHandler* handler) = 0;

  // Starts accepting connections on host:port (port 0 picks a free one). Returns "host:port".
  virtual StatusOr<std::string> Listen(const std::string& host, int port) = 0;

  // Connects to a listening peer, retrying until `timeout_s` passes (the peer may still be starting).
  virtual StatusOr<PeerId> Connect(const std::string& address, double timeout_s, Link link) = 0;

  // Thread-safe and non-blocking. `payload` must stay valid until `on_sent` runs (on a transport thread).
  // `on_sent` runs exactly once, also when the connection closes or the transport shuts down with the frame
  // still queued: callers count messages in flight by it (the worker's fused small pushes wait on that count).
  virtual void Send(PeerId to, std::string header, const void* payload, size_t length,
                    SendCallback on_sent) = 0;

  // A human-readable name of the peer (its address), for error messages.
  virtual std::string PeerName(PeerId peer) = 0;

  // Flushes what can be flushed within `timeout_s`, closes connections, stops the thread. Idempotent.
  virtual void Shutdown(double timeout_s) = 0;
};

}  // namespace bps

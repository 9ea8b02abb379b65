// A transport's handler calls (MessageHandler's and every send's on_sent) one at a time, also when the
// transport's connections are spread over several I/O threads (the TCP transport's BYTEPS_TCP_IO_THREADS).
// The parameter-server handlers (server, worker client, scheduler) were written for a transport whose
// callbacks never overlap, and they rely on it: rather than make each of them thread-safe, the callbacks
// take turns here. Only the callbacks do: payload bytes are received into the handler's buffers, and frames
// written, by the I/O threads in parallel, which is where the kernel's TCP spends its time.
//
// With one I/O thread nothing is locked: the callbacks are one thread's anyway.
#pragma once

#include <atomic>
#include <mutex>

#include "cc/transport/transport.h"

namespace bps {

class HandlerTurns : public MessageHandler {
 public:
  explicit HandlerTurns(bool several_threads) : several_threads_(several_threads) {}

  void Set(MessageHandler* handler) { handler_.store(handler); }

  void* PayloadDestination(PeerId from, const std::string& header, size_t length) override {
    Turn turn(this);
    MessageHandler* handler = handler_.load();
    return handler == nullptr ? nullptr : handler->PayloadDestination(from, header, length);
  }
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override {
    Turn turn(this);
    if (MessageHandler* handler = handler_.load()) handler->OnMessage(from, header, payload, length);
  }
  void OnPeerLost(PeerId peer, const Status& why) override {
    Turn turn(this);
    if (MessageHandler* handler = handler_.load()) handler->OnPeerLost(peer, why);
  }

  // `on_sent`, running in turn with the handler's calls (unchanged with one thread).
  SendCallback Wrap(SendCallback on_sent) {
    if (!several_threads_ || !on_sent) return on_sent;
    return [this, on_sent = std::move(on_sent)](const Status& status) {
      Turn turn(this);
      on_sent(status);
    };
  }

 private:
  // Recursive: a callback that makes the transport run another callback on its thread (none does today)
  // must not hang on its own turn.
  class Turn {
   public:
    explicit Turn(HandlerTurns* turns) : turns_(turns) {
      if (turns_->several_threads_) turns_->mu_.lock();
    }
    ~Turn() {
      if (turns_->several_threads_) turns_->mu_.unlock();
    }

   private:
    HandlerTurns* turns_;
  };

  const bool several_threads_;
  std::atomic<MessageHandler*> handler_{nullptr};
  std::recursive_mutex mu_;
};

}  // namespace bps

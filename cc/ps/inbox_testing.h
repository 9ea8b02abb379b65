// A MessageHandler for tests that play a node of the protocol: it keeps every decoded message (and
// payload), and hands them out by type, waiting a bounded time for one to arrive.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {
namespace testing {

class Inbox : public MessageHandler {
 public:
  void* PayloadDestination(PeerId, const std::string&, size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    payloads_.emplace_back(length);
    return payloads_.back().data();
  }
  void OnMessage(PeerId from, const std::string& header, void*, size_t) override {
    auto m = Message::Decode(header);
    std::lock_guard<std::mutex> lock(mu_);
    if (m.ok()) messages_.push_back({from, m.value()});
    cv_.notify_all();
  }
  void OnPeerLost(PeerId, const Status&) override {}

  std::vector<char> LastPayload() {
    std::lock_guard<std::mutex> lock(mu_);
    return payloads_.empty() ? std::vector<char>() : payloads_.back();
  }

  // The next message of `type`, or nothing within `seconds`.
  std::optional<std::pair<PeerId, Message>> Next(MessageType type, double seconds = 5) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<std::pair<PeerId, Message>> found;
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
      for (auto it = messages_.begin(); it != messages_.end(); ++it) {
        if (it->second.type == type) {
          found = *it;
          messages_.erase(it);
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<PeerId, Message>> messages_;
  std::deque<std::vector<char>> payloads_;
};

}  // namespace testing
}  // namespace bps

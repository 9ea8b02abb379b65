#include "cc/transport/inmemory_transport.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "cc/common/clock.h"

namespace bps {

class InMemoryTransport : public Transport {
 public:
  explicit InMemoryTransport(std::shared_ptr<InMemoryNetwork> network) : network_(std::move(network)) {
    thread_ = std::thread([this] { DeliveryLoop(); });
  }
  ~InMemoryTransport() override { Shutdown(0); }

  void SetHandler(MessageHandler* handler) override { handler_ = handler; }

  StatusOr<std::string> Listen(const std::string& host, int port) override {
    if (port == 0) port = network_->NextPort();
    address_ = host + ":" + std::to_string(port);
    network_->Register(address_, this);
    return address_;
  }

  StatusOr<PeerId> Connect(const std::string& address, double timeout_s, Link) override {
    Deadline deadline(timeout_s);
    while (true) {
      InMemoryTransport* remote = network_->Find(address);
      if (remote != nullptr) {
        PeerId local = AddLink(nullptr, -1, address);
        PeerId remote_id = remote->AddLink(this, local, address_.empty() ? "client" : address_);
        std::lock_guard<std::mutex> lock(mu_);
        links_[local].remote = remote;
        links_[local].remote_id = remote_id;
        return local;
      }
      if (deadline.expired()) return Unavailable("cannot connect to " + address + ": nobody listens there");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) override {
    InMemoryTransport* remote = nullptr;
    PeerId remote_id = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = links_.find(to);
      if (it != links_.end() && !it->second.lost) {
        remote = it->second.remote;
        remote_id = it->second.remote_id;
      }
    }
    Status status = remote != nullptr ? remote->Deliver(remote_id, std::move(header), payload, length)
                                      : Unavailable("connection to peer " + std::to_string(to) + " is closed");
    Post([on_sent, status] {
      if (on_sent) on_sent(status);
    });
  }

  std::string PeerName(PeerId peer) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(peer);
    return it == links_.end() ? "unknown peer" : it->second.name;
  }

  void Shutdown(double) override {
    std::vector<std::pair<InMemoryTransport*, PeerId>> remotes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      for (auto& entry : links_) {
        if (!entry.second.lost && entry.second.remote) remotes.emplace_back(entry.second.remote, entry.second.remote_id);
        entry.second.lost = true;
      }
    }
    if (!address_.empty()) network_->Unregister(address_);
    for (auto& r : remotes) r.first->LinkLost(r.second);
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Link {
    InMemoryTransport* remote = nullptr;
    PeerId remote_id = -1;
    std::string name;
    bool lost = false;
  };

  PeerId AddLink(InMemoryTransport* remote, PeerId remote_id, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    PeerId id = next_peer_++;
    links_[id] = Link{remote, remote_id, name, false};
    return id;
  }

  // Copies the payload now, as a real transport's eager path would, and delivers it on our thread.
  Status Deliver(PeerId from, std::string header, const void* payload, size_t length) {
    auto bytes = std::make_shared<std::vector<char>>(length);
    if (length) std::memcpy(bytes->data(), payload, length);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return Unavailable("peer has shut down");
    }
    Post([this, from, header = std::move(header), bytes] {
      void* dst = nullptr;
      if (!bytes->empty()) {
        dst = handler_->PayloadDestination(from, header, bytes->size());
        if (dst) std::memcpy(dst, bytes->data(), bytes->size());
      }
      handler_->OnMessage(from, header, dst, bytes->size());
    });
    return Status::OK();
  }

  void LinkLost(PeerId id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = links_.find(id);
      if (it == links_.end() || it->second.lost) return;
      it->second.lost = true;
    }
    Post([this, id] { handler_->OnPeerLost(id, Unavailable("connection closed by peer")); });
  }

  void Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    cv_.notify_one();
  }

  void DeliveryLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped and drained
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::shared_ptr<InMemoryNetwork> network_;
  MessageHandler* handler_ = nullptr;
  std::string address_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::map<PeerId, Link> links_;
  PeerId next_peer_ = 0;
  bool stopped_ = false;
  std::thread thread_;
};

void InMemoryNetwork::Register(const std::string& address, InMemoryTransport* transport) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_[address] = transport;
}

void InMemoryNetwork::Unregister(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.erase(address);
}

InMemoryTransport* InMemoryNetwork::Find(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = listeners_.find(address);
  return it == listeners_.end() ? nullptr : it->second;
}

int InMemoryNetwork::NextPort() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_port_++;
}

std::unique_ptr<Transport> CreateInMemoryTransport(std::shared_ptr<InMemoryNetwork> network) {
  return std::make_unique<InMemoryTransport>(std::move(network));
}

}  // namespace bps

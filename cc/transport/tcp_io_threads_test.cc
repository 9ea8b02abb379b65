// The TCP transport with several I/O threads: connections spread over them carry checked payloads both
// ways, the handler's callbacks never overlap, a lost peer is reported once while the others go on,
// silent peers are found on every thread, and a shutdown with frames still queued runs every on_sent once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/transport/address.h"
#include "cc/transport/handshake.h"
#include "cc/transport/tcp_frames.h"
#include "cc/transport/tcp_transport.h"
#include "cc/transport/raw_socket_testing.h"

namespace bps {
namespace {

const char kSecret[] = "the secret of the test job, 32+ bytes";
const size_t kSizes[] = {0, 1, 1000, 70000, 300000};

std::unique_ptr<Transport> MakeTcp(int io_threads, double liveness_s = 300) {
  TcpOptions options;
  options.secret = JobSecret::From(kSecret).value();
  options.io_threads = io_threads;
  options.liveness_timeout_s = liveness_s;
  auto transport = CreateTcpTransport(options);
  EXPECT_TRUE(transport.ok()) << transport.status().ToString();
  return std::move(transport.value());
}

char PatternByte(int client, int seq, size_t i) { return static_cast<char>(client * 131 + seq * 7 + i); }

std::vector<char> Pattern(int client, int seq, size_t length) {
  std::vector<char> bytes(length);
  for (size_t i = 0; i < length; ++i) bytes[i] = PatternByte(client, seq, i);
  return bytes;
}

bool MatchesPattern(const char* bytes, int client, int seq, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    if (bytes[i] != PatternByte(client, seq, i)) return false;
  }
  return true;
}

// Catches callbacks that overlap (they must take turns) and notes the threads they came from.
class TurnWatch {
 public:
  class Scope {
   public:
    explicit Scope(TurnWatch* watch) : watch_(watch) {
      if (watch_->inside_.fetch_add(1) != 0) watch_->overlapped_ = true;
      std::lock_guard<std::mutex> lock(watch_->mu_);
      watch_->threads_.insert(std::this_thread::get_id());
    }
    ~Scope() { watch_->inside_.fetch_sub(1); }

   private:
    TurnWatch* watch_;
  };
  bool overlapped() const { return overlapped_; }
  size_t threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_.size();
  }

 private:
  std::atomic<int> inside_{0};
  std::atomic<bool> overlapped_{false};
  std::mutex mu_;
  std::set<std::thread::id> threads_;
};

// Messages "client seq" with patterned payloads: the server checks each and echoes it back; a client checks
// each echo. One class plays both parts.
class Echo : public MessageHandler {
 public:
  explicit Echo(Transport* transport) : transport_(transport) {}

  void* PayloadDestination(PeerId, const std::string&, size_t length) override {
    TurnWatch::Scope scope(&watch_);
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.emplace_back(length);
    return buffers_.back().data();
  }
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override {
    TurnWatch::Scope scope(&watch_);
    int client = -1, seq = -1;
    std::istringstream(header) >> client >> seq;
    const bool intact = client >= 0 && length == kSizes[seq % 5] &&
                        (length == 0 || MatchesPattern(static_cast<char*>(payload), client, seq, length));
    std::lock_guard<std::mutex> lock(mu_);
    if (!intact) ++corrupt_;
    ++received_[client];
    peer_of_[client] = from;
    from_.insert(from);
    if (echo_) {
      ++sends_;
      transport_->Send(from, header, payload, length, [this](const Status&) {
        TurnWatch::Scope scope(&watch_);
        std::lock_guard<std::mutex> lock(mu_);
        ++sent_callbacks_;
      });
    }
    cv_.notify_all();
  }
  void OnPeerLost(PeerId peer, const Status&) override {
    TurnWatch::Scope scope(&watch_);
    std::lock_guard<std::mutex> lock(mu_);
    lost_.push_back(peer);
    cv_.notify_all();
  }
  bool WaitFor(std::function<bool()> done, double seconds = 60) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), done);
  }

  Transport* const transport_;
  bool echo_ = false;
  TurnWatch watch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<char>> buffers_;  // kept: echoes are sent from them
  std::map<int, int> received_;            // by client
  std::map<int, PeerId> peer_of_;          // the server's connection to each client
  std::set<PeerId> from_;                  // every connection heard from
  std::vector<PeerId> lost_;
  int corrupt_ = 0, sends_ = 0, sent_callbacks_ = 0;
};

struct Client {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Echo> inbox;
  PeerId server = -1;
  std::vector<std::vector<char>> payloads;
  std::atomic<int> sent_callbacks{0};
};

TEST(TcpIoThreadsTest, ManyPeersExchangeCheckedPayloadsBothWaysWhileOneIsLost) {
  constexpr int kClients = 8, kMessages = 40, kLostClient = 3;
  auto server = MakeTcp(4);
  Echo server_inbox(server.get());
  server_inbox.echo_ = true;
  server->SetHandler(&server_inbox);
  const std::string address = server->Listen("127.0.0.1", 0).value();

  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    auto client = std::make_unique<Client>();
    client->transport = MakeTcp(2);
    client->inbox = std::make_unique<Echo>(client->transport.get());
    client->transport->SetHandler(client->inbox.get());
    auto peer = client->transport->Connect(address, 10, Link::kControl);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    client->server = peer.value();
    for (int s = 0; s < kMessages; ++s) client->payloads.push_back(Pattern(c, s, kSizes[s % 5]));
    clients.push_back(std::move(client));
  }
  // Every client streams from its own thread; one of them is shut down halfway.
  std::vector<std::thread> senders;
  for (int c = 0; c < kClients; ++c) {
    senders.emplace_back([&, c] {
      Client& client = *clients[c];
      for (int s = 0; s < kMessages; ++s) {
        if (c == kLostClient && s == kMessages / 2) {
          ASSERT_TRUE(server_inbox.WaitFor([&] { return server_inbox.received_[c] >= 1; }));
          client.transport->Shutdown(0);
        }
        const auto& payload = client.payloads[s];
        client.transport->Send(client.server, std::to_string(c) + " " + std::to_string(s), payload.data(),
                               payload.size(), [&client](const Status&) { ++client.sent_callbacks; });
      }
    });
  }
  for (std::thread& sender : senders) sender.join();

  for (int c = 0; c < kClients; ++c) {
    if (c == kLostClient) continue;
    Echo& inbox = *clients[c]->inbox;
    ASSERT_TRUE(inbox.WaitFor([&] { return inbox.received_[c] == kMessages; })) << "client " << c;
    EXPECT_EQ(inbox.corrupt_, 0) << "client " << c;
    EXPECT_TRUE(inbox.lost_.empty()) << "client " << c;
  }
  ASSERT_TRUE(server_inbox.WaitFor([&] { return server_inbox.lost_.size() == 1; }));
  EXPECT_EQ(server_inbox.lost_[0], server_inbox.peer_of_[kLostClient]);
  EXPECT_LE(server_inbox.received_[kLostClient], kMessages);
  EXPECT_EQ(server_inbox.corrupt_, 0);
  EXPECT_FALSE(server_inbox.watch_.overlapped()) << "handler callbacks ran at the same time";
  EXPECT_GT(server_inbox.watch_.threads(), 1u) << "all connections were on one thread";

  for (auto& client : clients) client->transport->Shutdown(1);
  server->Shutdown(1);
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(clients[c]->sent_callbacks, kMessages) << "client " << c;
  EXPECT_EQ(server_inbox.sent_callbacks_, server_inbox.sends_);
  EXPECT_GT(server_inbox.sends_, (kClients - 1) * kMessages - 1);
  EXPECT_FALSE(server_inbox.watch_.overlapped());
}

// A plain socket that authenticates and says hello, then reads nothing and says nothing more.
int SilentMember(const std::string& address) {
  int fd = testing::RawConnect(address);
  EXPECT_TRUE(RunClientHandshake(fd, JobSecret::From(kSecret).value(), Deadline(10)).ok());
  const std::string hello = FramePrefix(5, 0) + "0 0 x";
  EXPECT_EQ(send(fd, hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  return fd;
}

TEST(TcpIoThreadsTest, SilentPeersAreLostOnEveryThreadWhileHeartbeatsKeepTheOthers) {
  constexpr int kThreads = 3;
  auto server = MakeTcp(kThreads, 1.0);
  Echo server_inbox(server.get());
  server->SetHandler(&server_inbox);
  const std::string address = server->Listen("127.0.0.1", 0).value();
  std::vector<std::unique_ptr<Transport>> live;
  std::vector<int> silent;
  // Round robin, one at a time: a live and a silent connection on every thread.
  for (int i = 0; i < kThreads; ++i) {
    live.push_back(MakeTcp(2, 1.0));
    auto peer = live.back()->Connect(address, 10, Link::kControl);
    ASSERT_TRUE(peer.ok());
    live.back()->Send(peer.value(), "1 0", nullptr, 0, nullptr);
    ASSERT_TRUE(server_inbox.WaitFor([&] { return server_inbox.received_[1] == i + 1; }, 10));
    silent.push_back(SilentMember(address));
    ASSERT_TRUE(server_inbox.WaitFor([&] { return server_inbox.received_[0] == i + 1; }, 10));
  }
  ASSERT_TRUE(server_inbox.WaitFor([&] { return server_inbox.lost_.size() == kThreads; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  std::set<PeerId> lost(server_inbox.lost_.begin(), server_inbox.lost_.end());
  EXPECT_EQ(server_inbox.lost_.size(), static_cast<size_t>(kThreads)) << "a live connection was lost";
  std::set<int> threads;
  for (PeerId peer : lost) threads.insert(peer % kThreads);
  EXPECT_EQ(threads.size(), static_cast<size_t>(kThreads));
  for (int fd : silent) close(fd);
  for (auto& transport : live) transport->Shutdown(1);
  server->Shutdown(1);
}

TEST(TcpIoThreadsTest, ShutdownWithQueuedFramesRunsEveryCallbackOnce) {
  constexpr int kThreads = 4, kPeers = 8, kSenders = 4, kSendsEach = 300;
  auto server = MakeTcp(kThreads);
  Echo server_inbox(server.get());
  server->SetHandler(&server_inbox);
  const std::string address = server->Listen("127.0.0.1", 0).value();
  std::vector<int> silent;  // they read nothing: frames to them stay queued
  for (int i = 0; i < kPeers; ++i) silent.push_back(SilentMember(address));
  ASSERT_TRUE(server_inbox.WaitFor([&] { return server_inbox.received_[0] == kPeers; }, 10));
  std::vector<PeerId> peers;
  {
    std::lock_guard<std::mutex> lock(server_inbox.mu_);
    peers.assign(server_inbox.from_.begin(), server_inbox.from_.end());
  }
  ASSERT_EQ(peers.size(), static_cast<size_t>(kPeers));

  const std::vector<char> payload(1 << 20, 'x');
  std::vector<std::atomic<int>> calls(kSenders * kSendsEach);
  std::atomic<int> sent{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < kSenders; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kSendsEach; ++i) {
        const int index = t * kSendsEach + i;
        server->Send(peers[index % kPeers], "frame", payload.data(), payload.size(),
                     [&calls, index](const Status&) { ++calls[index]; });
        ++sent;
      }
    });
  }
  while (sent < kSenders * kSendsEach / 2) std::this_thread::yield();
  server->Shutdown(0.2);  // while the senders go on
  for (std::thread& sender : senders) sender.join();
  int once = 0;
  for (auto& count : calls) once += count == 1;
  EXPECT_EQ(once, kSenders * kSendsEach);
  for (int fd : silent) close(fd);
}

}  // namespace
}  // namespace bps

// The same conformance tests for every Transport: bps_tf's TCP and UCX on loopback, and the in-memory one.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/transport/inmemory_transport.h"
#include "cc/transport/tcp_transport.h"
#include "cc/transport/transport.h"
#include "cc/transport/ucx_transport.h"

namespace bps {
namespace {

// Records what arrives; payloads land in buffers allocated per message.
class Recorder : public MessageHandler {
 public:
  struct Received {
    PeerId from;
    std::string header;
    std::vector<char> payload;
    bool payload_arrived;
  };

  void* PayloadDestination(PeerId, const std::string& header, size_t length) override {
    if (header == "refuse") return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.emplace_back(new std::vector<char>(length));
    return buffers_.back()->data();
  }
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    Received r{from, header, {}, payload != nullptr};
    if (payload) r.payload.assign(static_cast<char*>(payload), static_cast<char*>(payload) + length);
    received_.push_back(std::move(r));
    cv_.notify_all();
  }
  void OnPeerLost(PeerId peer, const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    lost_.push_back(peer);
    last_loss_ = why;
    cv_.notify_all();
  }

  bool WaitFor(std::function<bool()> done, double seconds = 10) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), done);
  }
  std::vector<Received> received_;
  std::vector<PeerId> lost_;
  Status last_loss_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<std::vector<char>>> buffers_;
};

using Factory = std::function<std::unique_ptr<Transport>()>;

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Transport> Make() {
    if (GetParam() == "inmemory") {
      if (!network_) network_ = std::make_shared<InMemoryNetwork>();
      return CreateInMemoryTransport(network_);
    }
    if (GetParam() == "tcp" || GetParam() == "tcp_io_threads") {
      TcpOptions options;
      options.secret = JobSecret::From("a secret shared by the test's peers").value();
      if (GetParam() == "tcp_io_threads") options.io_threads = 3;
      auto transport = CreateTcpTransport(options);
      EXPECT_TRUE(transport.ok()) << transport.status().ToString();
      return std::move(transport.value());
    }
    UcxOptions options;
    options.secret = JobSecret::From("a secret shared by the test's peers").value();
    if (GetParam() == "ucx_eager") options.eager = EagerPayloads::kAlways;  // large messages in fragments
    auto transport = CreateUcxTransport(options);
    EXPECT_TRUE(transport.ok()) << transport.status().ToString();
    return std::move(transport.value());
  }

  void SetUp() override {
    server_ = Make();
    client_ = Make();
    server_->SetHandler(&server_inbox_);
    client_->SetHandler(&client_inbox_);
    auto address = server_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(address.ok()) << address.status().ToString();
    server_address_ = address.value();
    Link link = Link::kControl;
    if (GetParam() == "ucx_unwatched") {  // a data link within the host: may use shared memory
      ASSERT_TRUE(client_->Listen("127.0.0.1", 0).ok());
      link = Link::kData;
    }
    auto peer = client_->Connect(address.value(), 10, link);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    to_server_ = peer.value();
  }

  void TearDown() override {
    client_->Shutdown(2);
    server_->Shutdown(2);
  }

  std::shared_ptr<InMemoryNetwork> network_;
  std::unique_ptr<Transport> server_, client_;
  Recorder server_inbox_, client_inbox_;
  PeerId to_server_ = -1;
  std::string server_address_;
};

TEST_P(TransportTest, PayloadsOfEverySizeArriveIntact) {
  std::vector<size_t> sizes = {0, 1, 7, 4096, 100000, 8 << 20};
  std::vector<std::vector<char>> payloads;
  for (size_t n : sizes) {
    std::vector<char> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i * 31 + n);
    payloads.push_back(std::move(p));
  }
  std::atomic<int> sent_ok{0};  // read here while the transport's threads count
  for (size_t i = 0; i < sizes.size(); ++i) {
    client_->Send(to_server_, "msg" + std::to_string(i), payloads[i].data(), payloads[i].size(),
                  [&](const Status& s) {
                    if (s.ok()) ++sent_ok;
                  });
  }
  ASSERT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.received_.size() == sizes.size(); }));
  for (auto& r : server_inbox_.received_) {
    size_t i = std::stoul(r.header.substr(3));
    EXPECT_EQ(r.payload, payloads[i]) << "size " << sizes[i];
  }
  for (int i = 0; i < 100 && sent_ok < (int)sizes.size(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(sent_ok, (int)sizes.size());
}

TEST_P(TransportTest, ServerRepliesOnTheAcceptedConnection) {
  client_->Send(to_server_, "ping", nullptr, 0, nullptr);
  ASSERT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.received_.size() == 1; }));
  PeerId from = server_inbox_.received_[0].from;
  std::vector<char> data(300000, 'x');
  server_->Send(from, "pong", data.data(), data.size(), nullptr);
  ASSERT_TRUE(client_inbox_.WaitFor([&] { return client_inbox_.received_.size() == 1; }));
  EXPECT_EQ(client_inbox_.received_[0].header, "pong");
  EXPECT_EQ(client_inbox_.received_[0].payload, data);
  EXPECT_EQ(client_inbox_.received_[0].from, to_server_);
}

TEST_P(TransportTest, LargeHeadersArrive) {
  std::string header(200000, 'h');
  header[12345] = 'z';
  client_->Send(to_server_, header, nullptr, 0, nullptr);
  ASSERT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.received_.size() == 1; }));
  EXPECT_EQ(server_inbox_.received_[0].header, header);
}

TEST_P(TransportTest, RefusedPayloadIsReportedNotWritten) {
  std::vector<char> data(1 << 20, 'r');
  client_->Send(to_server_, "refuse", data.data(), data.size(), nullptr);
  ASSERT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.received_.size() == 1; }));
  EXPECT_FALSE(server_inbox_.received_[0].payload_arrived);
}

TEST_P(TransportTest, PeerShutdownIsReported) {
  if (GetParam() == "ucx_unwatched") GTEST_SKIP() << "by design the control link reports an unwatched link's loss";
  client_->Send(to_server_, "hello", nullptr, 0, nullptr);
  ASSERT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.received_.size() == 1; }));
  server_->Shutdown(1);
  ASSERT_TRUE(client_inbox_.WaitFor([&] { return client_inbox_.lost_.size() == 1; }, 20));
  EXPECT_EQ(client_inbox_.lost_[0], to_server_);
  Status after;
  bool done = false;
  std::mutex mu;
  client_->Send(to_server_, "late", nullptr, 0, [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    after = s;
    done = true;
  });
  for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(done);
  EXPECT_FALSE(after.ok());
}

TEST_P(TransportTest, ConnectToNobodyTimesOut) {
  auto other = Make();
  Recorder inbox;
  other->SetHandler(&inbox);
  auto peer = other->Connect("127.0.0.1:1", 1.0, Link::kControl);
  EXPECT_FALSE(peer.ok());
  EXPECT_NE(peer.status().message().find("127.0.0.1:1"), std::string::npos) << peer.status().message();
  other->Shutdown(1);
}

// Only members of the job connect: a peer with another secret is turned away at once, on both transports.
TEST_P(TransportTest, AnotherJobsSecretIsTurnedAwayAtOnce) {
  if (GetParam() == "inmemory") GTEST_SKIP() << "the in-memory transport has no strangers";
  std::unique_ptr<Transport> stranger;
  if (GetParam() == "tcp" || GetParam() == "tcp_io_threads") {
    TcpOptions options;
    options.secret = JobSecret::From("another job's secret entirely").value();
    stranger = std::move(CreateTcpTransport(options).value());
  } else {
    UcxOptions options;
    options.secret = JobSecret::From("another job's secret entirely").value();
    stranger = std::move(CreateUcxTransport(options).value());
  }
  Recorder inbox;
  stranger->SetHandler(&inbox);
  Deadline deadline(60);
  auto peer = stranger->Connect(server_address_, 30, Link::kControl);
  ASSERT_FALSE(peer.ok());
  EXPECT_EQ(peer.status().code(), Code::kUnauthenticated) << peer.status().ToString();
  EXPECT_GT(deadline.remaining(), 50);
  stranger->Send(peer.ok() ? peer.value() : 0, "ignored", nullptr, 0, nullptr);
  stranger->Shutdown(1);
  client_->Send(to_server_, "still served", nullptr, 0, nullptr);
  ASSERT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.received_.size() == 1; }));
  EXPECT_EQ(server_inbox_.received_[0].header, "still served");
  EXPECT_TRUE(server_inbox_.lost_.empty());
}

INSTANTIATE_TEST_SUITE_P(AllTransports, TransportTest, ::testing::Values("inmemory", "tcp", "tcp_io_threads", "ucx",
                                                                            "ucx_eager", "ucx_unwatched"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace bps

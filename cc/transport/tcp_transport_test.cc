// bps_tf's TCP transport against strangers and broken peers: wrong secrets, garbage before and after the
// handshake, silence. After each, the transport still serves a real peer.
#include "cc/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/transport/address.h"
#include "cc/transport/stream_frames.h"
#include "cc/transport/tcp_frames.h"
#include "cc/transport/handshake.h"
#include "cc/transport/raw_socket_testing.h"

namespace bps {
namespace {

using testing::RawConnect;

const char kSecret[] = "the secret of the test job, 32+ bytes";

class Inbox : public MessageHandler {
 public:
  void* PayloadDestination(PeerId, const std::string&, size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.emplace_back(length);
    return buffers_.back().data();
  }
  void OnMessage(PeerId from, const std::string& header, void*, size_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back({from, header});
    cv_.notify_all();
  }
  void OnPeerLost(PeerId peer, const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    lost_.push_back({peer, why.message()});
    cv_.notify_all();
  }
  bool WaitFor(std::function<bool()> done, double seconds = 10) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), done);
  }
  size_t messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_.size();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<PeerId, std::string>> messages_;
  std::vector<std::pair<PeerId, std::string>> lost_;
  std::deque<std::vector<char>> buffers_;
};

std::unique_ptr<Transport> MakeTcpWith(int io_threads, const char* secret, double liveness_s, double handshake_s) {
  TcpOptions options;
  options.io_threads = io_threads;
  options.secret = JobSecret::From(secret).value();
  options.liveness_timeout_s = liveness_s;
  options.handshake_timeout_s = handshake_s;
  auto transport = CreateTcpTransport(options);
  EXPECT_TRUE(transport.ok());
  return std::move(transport.value());
}


void SendBytes(int fd, const std::string& bytes) {
  ssize_t unused = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  (void)unused;  // the transport may have closed the connection already: that is the point
}

// Each case with one I/O thread and with three (connections spread over them).
class TcpTransportTest : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<Transport> MakeTcp(const char* secret = kSecret, double liveness_s = 300, double handshake_s = 10) {
    return MakeTcpWith(GetParam(), secret, liveness_s, handshake_s);
  }

  void SetUp() override {
    server_ = MakeTcp();
    server_->SetHandler(&server_inbox_);
    address_ = server_->Listen("127.0.0.1", 0).value();
  }
  void TearDown() override { server_->Shutdown(1); }

  // A member of the job still connects and is heard.
  void ExpectStillServing() {
    auto client = MakeTcp();
    Inbox inbox;
    client->SetHandler(&inbox);
    auto peer = client->Connect(address_, 10, Link::kControl);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    size_t before = server_inbox_.messages();
    client->Send(peer.value(), "still serving", nullptr, 0, nullptr);
    EXPECT_TRUE(server_inbox_.WaitFor([&] { return server_inbox_.messages_.size() > before; }));
    client->Shutdown(1);
  }

  std::unique_ptr<Transport> server_;
  Inbox server_inbox_;
  std::string address_;
};

TEST_P(TcpTransportTest, AWrongSecretFailsAtOnceAndTheServerGoesOn) {
  auto stranger = MakeTcp("another job's secret, also long");
  Inbox inbox;
  stranger->SetHandler(&inbox);
  Deadline started(100);
  auto peer = stranger->Connect(address_, 30, Link::kControl);
  ASSERT_FALSE(peer.ok());
  EXPECT_EQ(peer.status().code(), Code::kUnauthenticated) << peer.status().ToString();
  EXPECT_NE(peer.status().message().find("BYTEPS_JOB_SECRET"), std::string::npos) << peer.status().message();
  EXPECT_GT(started.remaining(), 95) << "a wrong secret must not wait for the timeout";
  stranger->Shutdown(1);
  EXPECT_TRUE(server_inbox_.lost_.empty());
  ExpectStillServing();
}

TEST_P(TcpTransportTest, AServerWithAnotherSecretIsNotTrusted) {
  auto impostor = MakeTcp("an impostor's secret, long enough");
  Inbox inbox;
  impostor->SetHandler(&inbox);
  std::string impostor_address = impostor->Listen("127.0.0.1", 0).value();
  auto client = MakeTcp();
  client->SetHandler(&inbox);
  auto peer = client->Connect(impostor_address, 30, Link::kControl);
  ASSERT_FALSE(peer.ok());
  EXPECT_EQ(peer.status().code(), Code::kUnauthenticated);
  client->Shutdown(1);
  impostor->Shutdown(1);
}

TEST_P(TcpTransportTest, GarbageBeforeTheHandshakeIsTurnedAway) {
  std::mt19937 random(7);
  std::vector<std::string> garbage = {std::string(1000, '\0'), std::string(512, '\xff'), "GET / HTTP/1.0\r\n\r\n"};
  for (int i = 0; i < 200; ++i) {
    std::string bytes(random() % 4096 + 1, '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    garbage.push_back(bytes);
  }
  for (const std::string& bytes : garbage) {
    int fd = RawConnect(address_);
    SendBytes(fd, bytes);
    close(fd);
  }
  EXPECT_TRUE(server_inbox_.messages_.empty());
  ExpectStillServing();
}

TEST_P(TcpTransportTest, GarbageAfterTheHandshakeClosesOnlyThatConnection) {
  JobSecret secret = JobSecret::From(kSecret).value();
  std::mt19937 random(11);
  for (int i = 0; i < 50; ++i) {
    int fd = RawConnect(address_);
    ASSERT_TRUE(RunClientHandshake(fd, secret, Deadline(10)).ok());
    std::string bytes(random() % 2048 + 1, '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    if (i % 2 == 0) {  // a prefix claiming an oversized header, then noise
      bytes = FramePrefix(kMaxHeaderBytes + 1, 0) + bytes;
    }
    SendBytes(fd, bytes);
    close(fd);
  }
  ExpectStillServing();
}

TEST_P(TcpTransportTest, AStrangerThatSaysNothingIsDroppedAfterTheHandshakeTimeout) {
  auto server = MakeTcp(kSecret, 300, 0.5);
  Inbox inbox;
  server->SetHandler(&inbox);
  std::string address = server->Listen("127.0.0.1", 0).value();
  int fd = RawConnect(address);
  char buffer[64];
  ASSERT_EQ(recv(fd, buffer, sizeof(buffer), MSG_WAITALL), static_cast<ssize_t>(kServerHelloBytes));
  Deadline deadline(5);
  ssize_t n = recv(fd, buffer, sizeof(buffer), 0);  // blocks until the server closes
  EXPECT_EQ(n, 0);
  EXPECT_GT(deadline.remaining(), 3);
  close(fd);
  server->Shutdown(1);
}

TEST_P(TcpTransportTest, StrangersHoldingEveryHandshakePlaceKeepNoMemberOut) {
  // More idle strangers than places for handshakes, some holding a place since before, some just arrived.
  std::vector<int> strangers;
  for (int i = 0; i < 300; ++i) strangers.push_back(RawConnect(address_));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  for (int i = 0; i < 200; ++i) strangers.push_back(RawConnect(address_));
  for (int round = 0; round < 3; ++round) {
    Deadline deadline(10);
    ExpectStillServing();
    EXPECT_GT(deadline.remaining(), 8) << "a member must get in within 2 s whatever strangers hold";
  }
  for (int fd : strangers) close(fd);
}

// Strangers holding `count` connections to `address`, each opened again as soon as the server closes it, until
// destroyed: with more of them than places for handshakes, they take every place all the time.
class ReopeningStrangers {
 public:
  ReopeningStrangers(const std::string& address, int count) {
    auto parsed = ParseHostPort(address).value();
    address_.sin_family = AF_INET;
    address_.sin_port = htons(static_cast<uint16_t>(parsed.port));
    inet_pton(AF_INET, parsed.host.c_str(), &address_.sin_addr);
    for (int i = 0; i < count; ++i) fds_.push_back(Open());
    thread_ = std::thread([this] { Run(); });
  }
  ~ReopeningStrangers() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  long reopened() const { return reopened_; }

 private:
  int Open() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&address_), sizeof(address_));
    (void)rc;  // in progress; a failure shows as the connection's end
    return fd;
  }
  void Run() {
    std::vector<pollfd> polls(fds_.size());
    while (!stop_) {
      for (size_t i = 0; i < fds_.size(); ++i) polls[i] = {fds_[i], POLLIN, 0};
      poll(polls.data(), polls.size(), 10);
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (polls[i].revents == 0) continue;
        char bytes[64];
        ssize_t n = recv(fds_[i], bytes, sizeof(bytes), MSG_DONTWAIT);  // the hello, or the end
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) continue;
        close(fds_[i]);
        fds_[i] = Open();
        ++reopened_;
      }
    }
  }

  sockaddr_in address_{};
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<long> reopened_{0};
  std::thread thread_;
};

TEST_P(TcpTransportTest, StrangersReopeningEveryClosedConnectionKeepNoMemberOut) {
  // Four times as many strangers as places, each back as soon as the server closed it: the server closes
  // thousands of connections a second, every place is taken whenever a member arrives, and the queue of
  // the listening socket holds the rest of the strangers ahead of it.
  ReopeningStrangers strangers(address_, 500);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int round = 0; round < 10; ++round) {
    Deadline deadline(10);
    ExpectStillServing();
    EXPECT_GT(deadline.remaining(), 8) << "a member must get in within 2 s whatever strangers hold";
  }
  EXPECT_GT(strangers.reopened(), 1000) << "the strangers did not keep every place taken";
}

TEST_P(TcpTransportTest, AFrozenPeerIsReportedLostAfterTheLivenessTimeout) {
  auto server = MakeTcp(kSecret, 1.0);
  Inbox inbox;
  server->SetHandler(&inbox);
  std::string address = server->Listen("127.0.0.1", 0).value();
  // A member that authenticates, speaks once, then neither sends nor answers anything (as under SIGSTOP).
  int fd = RawConnect(address);
  ASSERT_TRUE(RunClientHandshake(fd, JobSecret::From(kSecret).value(), Deadline(10)).ok());
  SendBytes(fd, FramePrefix(5, 0) + "hello");
  ASSERT_TRUE(inbox.WaitFor([&] { return inbox.messages_.size() == 1; }));
  Deadline deadline(10);
  ASSERT_TRUE(inbox.WaitFor([&] { return inbox.lost_.size() == 1; }, 10));
  EXPECT_NE(inbox.lost_[0].second.find("no sign of life"), std::string::npos) << inbox.lost_[0].second;
  EXPECT_GT(deadline.remaining(), 7);
  close(fd);
  server->Shutdown(1);
}

TEST_P(TcpTransportTest, ASendFromAFailedSendsCallbackToTheClosingPeerIsAnsweredToo) {
  // The worker's fused pushes send the next message from the last one's callback: when a connection closes
  // with frames queued, that next send must be reported as failed too, not left on the dead connection.
  auto server = MakeTcp(kSecret, 1.0);
  Inbox inbox;
  server->SetHandler(&inbox);
  std::string address = server->Listen("127.0.0.1", 0).value();
  int fd = RawConnect(address);  // a member that speaks once, then reads nothing: the frames stay queued
  ASSERT_TRUE(RunClientHandshake(fd, JobSecret::From(kSecret).value(), Deadline(10)).ok());
  SendBytes(fd, FramePrefix(5, 0) + "hello");
  ASSERT_TRUE(inbox.WaitFor([&] { return inbox.messages_.size() == 1; }));
  const PeerId member = inbox.messages_[0].first;
  std::vector<char> payload(size_t(32) << 20, 'x');
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Status> answers;
  auto record = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    answers.push_back(s);
    cv.notify_all();
  };
  server->Send(member, "first", payload.data(), payload.size(), [&](const Status& s) {
    record(s);
    server->Send(member, "next", payload.data(), payload.size(), record);
  });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return answers.size() == 2; }))
      << answers.size() << " of the 2 sends were answered once the member was dropped";
  EXPECT_FALSE(answers[0].ok());
  EXPECT_FALSE(answers[1].ok());
  lock.unlock();
  close(fd);
  server->Shutdown(1);
}

TEST_P(TcpTransportTest, HeartbeatsKeepAnIdleConnectionAlive) {
  auto server = MakeTcp(kSecret, 1.0);
  auto client = MakeTcp(kSecret, 1.0);
  Inbox server_inbox, client_inbox;
  server->SetHandler(&server_inbox);
  client->SetHandler(&client_inbox);
  auto peer = client->Connect(server->Listen("127.0.0.1", 0).value(), 10, Link::kControl);
  ASSERT_TRUE(peer.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_TRUE(server_inbox.lost_.empty());
  EXPECT_TRUE(client_inbox.lost_.empty());
  client->Send(peer.value(), "after a quiet while", nullptr, 0, nullptr);
  EXPECT_TRUE(server_inbox.WaitFor([&] { return server_inbox.messages_.size() == 1; }));
  client->Shutdown(1);
  server->Shutdown(1);
}

INSTANTIATE_TEST_SUITE_P(IoThreads, TcpTransportTest, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "_io_threads";
                         });

class Frames : public FrameReader::Sink {
 public:
  void* Destination(const std::string& header, size_t length) override {
    if (header == "drop") return nullptr;
    payloads.emplace_back(length);
    return payloads.back().data();
  }
  void Frame(const std::string& header, void* payload, size_t) override {
    headers.push_back(header);
    arrived.push_back(payload != nullptr);
  }
  std::deque<std::vector<char>> payloads;
  std::vector<std::string> headers;
  std::vector<bool> arrived;
};

TEST(FrameReaderTest, FramesSplitAtEveryByteArriveWhole) {
  std::string payload(100000, 'p');
  std::string stream = FramePrefix(3, 0) + "one" + FramePrefix(0, 0) + FramePrefix(3, payload.size()) + "two" +
                       payload + FramePrefix(4, 5) + "drop" + "xxxxx";
  FrameReader reader;
  Frames frames;
  for (char byte : stream) ASSERT_TRUE(reader.Feed(&byte, 1, frames).ok());
  EXPECT_EQ(frames.headers, (std::vector<std::string>{"one", "two", "drop"}));
  EXPECT_EQ(frames.arrived, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(std::string(frames.payloads[0].begin(), frames.payloads[0].end()), payload);
}

// After a large payload a read stops where the next header should end, guessing its length from the last
// one: headers shorter and longer than the guess, small frames between large ones, and dropped payloads all
// arrive whole and in order through a socket.
TEST(FrameReaderTest, LargeAndSmallFramesCrossASocketWhole) {
  std::vector<std::pair<std::string, std::string>> sent;  // header, payload
  for (int i = 0; i < 40; ++i) {
    const size_t bytes = i % 5 == 4 ? 100 : (i % 7 == 0 ? 0 : 70000 + 997 * i);
    std::string payload(bytes, '\0');
    for (size_t b = 0; b < bytes; ++b) payload[b] = static_cast<char>('a' + (b * 31 + i) % 26);
    sent.emplace_back(i % 9 == 3 ? "drop" : std::string(1 + (i * 13) % 40, static_cast<char>('A' + i % 26)), payload);
  }
  std::string stream;
  for (const auto& frame : sent) stream += FramePrefix(frame.first.size(), frame.second.size()) + frame.first + frame.second;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_EQ(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
  std::thread writer([&] {
    for (size_t at = 0; at < stream.size(); at += 30000) {  // in pieces, so that reads find partial frames
      ASSERT_TRUE(SendAll(fds[1], stream.substr(at, 30000), "test stream").ok());
    }
  });
  FrameReader reader;
  Frames frames;
  for (int turns = 0; frames.headers.size() < sent.size() && turns < 100000; ++turns) {
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, 1000);
    ASSERT_TRUE(reader.ReadFrom(fds[0], frames).ok());
  }
  writer.join();
  close(fds[0]);
  close(fds[1]);
  ASSERT_EQ(frames.headers.size(), sent.size());
  size_t kept = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(frames.headers[i], sent[i].first);
    const bool has_payload = !sent[i].second.empty() && sent[i].first != "drop";
    EXPECT_EQ(frames.arrived[i], has_payload) << "frame " << i;
    if (!has_payload) continue;
    EXPECT_TRUE(std::string(frames.payloads[kept].begin(), frames.payloads[kept].end()) == sent[i].second)
        << "payload of frame " << i;
    ++kept;
  }
}

TEST(FrameReaderTest, LengthsBeyondTheLimitsEndTheStream) {
  for (const std::string& prefix : {FramePrefix(kMaxHeaderBytes + 1, 0), FramePrefix(1, kMaxPayloadBytes + 1),
                                    FramePrefix(0, 7)}) {
    FrameReader reader;
    Frames frames;
    EXPECT_FALSE(reader.Feed(prefix.data(), prefix.size(), frames).ok());
    EXPECT_TRUE(frames.headers.empty());
  }
}

}  // namespace
}  // namespace bps

// The listener's admission of connections on a real socket, without a transport: members are admitted,
// strangers and the silent are closed, and a full listener leaves newcomers queued until the longest-waiting
// has had its grace.
#include "cc/transport/tcp_listener.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <limits>
#include <vector>

#include "cc/common/clock.h"
#include "cc/transport/address.h"

namespace bps {
namespace {

const char kSecret[] = "the secret of the test job, 32+ bytes";

class TcpListenerTest : public ::testing::Test {
 protected:
  void SetUp() override { Listen(TcpListener::Limits{}); }
  void TearDown() override {
    listener_->CloseAll();
    close(listen_fd_);
    for (int fd : admitted_) close(fd);
  }

  void Listen(TcpListener::Limits limits) {
    if (listener_) listener_->CloseAll();
    listener_ = std::make_unique<TcpListener>(
        JobSecret::From(kSecret).value(), limits, &loop_,
        [this](int fd, const std::string&) { admitted_.push_back(fd); }, [](int, bool) {});
    if (listen_fd_ >= 0) return;
    sockaddr_in addr;
    ASSERT_TRUE(Ipv4SocketAddress("127.0.0.1", 0, &addr));
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listen_fd_, 16), 0);
    socklen_t length = sizeof(addr_);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr_), &length);
  }

  // A client socket connected to the listener, accepted by it.
  int Connect() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)), 0);
    for (int i = 0; i < 100 && !Accepted(); ++i) usleep(10000);
    return fd;
  }
  bool Accepted() {
    const size_t before = listener_->pending();
    listener_->Accept(listen_fd_, /*stopping=*/false, NowSeconds());
    return listener_->pending() > before;
  }
  // Feeds the listener what arrived on its pending connections until `done` or a few seconds pass.
  void Serve(const std::function<bool()>& done) {
    for (int i = 0; i < 300 && !done(); ++i) {
      std::vector<int> fds;
      for (int fd = 0; fd < 1024; ++fd) {
        if (listener_->Pending(fd)) fds.push_back(fd);
      }
      for (int fd : fds) listener_->OnReadable(fd);
      usleep(10000);
    }
  }
  // Whether the listener closed the other end of `fd` (after reading what it sent).
  static bool ClosedByPeer(int fd) {
    char buffer[256];
    for (int i = 0; i < 100; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) == 1) {
        ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
        if (n <= 0) return true;
      }
    }
    return false;
  }

  // How many bytes arrived on `fd` within 100 ms (the hello, for an accepted connection).
  static ssize_t Arrived(int fd) {
    char buffer[256];
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) return 0;
    return recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
  }

  // Whether the loop would wake for `fd` now (the test's thread stands in for the loop's).
  bool WakesFor(int fd) {
    epoll_event events[8];
    const int n = loop_.Wait(events, 8, 0);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == fd) return true;
    }
    return false;
  }

  EventLoop loop_{"the test's loop"};  // never started: it records what is watched, WakesFor asks
  std::unique_ptr<TcpListener> listener_;
  int listen_fd_ = -1;
  sockaddr_in addr_{};
  std::vector<int> admitted_;
};

TEST_F(TcpListenerTest, AMemberIsAdmittedOnceItsProofArrives) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)), 0);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);  // the client's handshake polls a non-blocking socket
  const JobSecret secret = JobSecret::From(kSecret).value();
  auto client = std::async(std::launch::async, [&] { return RunClientHandshake(fd, secret, Deadline(5)); });
  for (int i = 0; i < 100 && !Accepted(); ++i) usleep(10000);
  EXPECT_EQ(listener_->pending(), 1u);
  Serve([&] { return !admitted_.empty(); });
  EXPECT_TRUE(client.get().ok());
  ASSERT_EQ(admitted_.size(), 1u);
  EXPECT_EQ(listener_->pending(), 0u) << "an admitted connection is the transport's";
  close(fd);
}

TEST_F(TcpListenerTest, AStrangersWrongProofIsTurnedAway) {
  int fd = Connect();
  ASSERT_EQ(listener_->pending(), 1u);
  std::string garbage(kClientProofBytes, 'x');
  ASSERT_EQ(send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL), static_cast<ssize_t>(garbage.size()));
  Serve([&] { return listener_->pending() == 0; });
  EXPECT_EQ(listener_->pending(), 0u);
  EXPECT_TRUE(admitted_.empty());
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
}

TEST_F(TcpListenerTest, ASilentConnectionIsClosedAfterTheHandshakeTimeout) {
  int fd = Connect();
  ASSERT_EQ(listener_->pending(), 1u);
  listener_->Tick(NowSeconds() + 1);
  EXPECT_EQ(listener_->pending(), 1u) << "within the timeout";
  listener_->Tick(NowSeconds() + TcpListener::Limits{}.handshake_timeout_s + 1);
  EXPECT_EQ(listener_->pending(), 0u);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
}

// A grace far longer than any test step, with the clock passed in: the results do not depend on how fast
// the machine runs the test.
constexpr double kLongGraceS = 10;

TEST_F(TcpListenerTest, AFullListenerQueuesNewcomersUntilTheLongestWaitingHadItsGrace) {
  Listen(TcpListener::Limits{/*max_pending=*/2, kLongGraceS, /*handshake_timeout_s=*/60});
  int first = Connect();
  int second = Connect();
  ASSERT_EQ(listener_->pending(), 2u);
  std::vector<int> queued;
  for (int i = 0; i < 3; ++i) {
    queued.push_back(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(connect(queued.back(), reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)), 0);
  }
  usleep(50000);
  // Within the grace the newcomers stay in the kernel's queue: the two keep their places, none is closed.
  listener_->Accept(listen_fd_, false, NowSeconds());
  EXPECT_EQ(listener_->pending(), 2u);
  EXPECT_EQ(Arrived(queued[0]), 0) << "a queued connection gets no hello yet";
  // After it, the first two in the queue take the places of the two that waited longest, in the order they
  // came; the third waits for the grace of those two.
  listener_->Accept(listen_fd_, false, NowSeconds() + 2 * kLongGraceS);
  EXPECT_EQ(listener_->pending(), 2u);
  EXPECT_TRUE(ClosedByPeer(first));
  EXPECT_TRUE(ClosedByPeer(second));
  EXPECT_GT(Arrived(queued[0]), 0) << "the first in the queue got the hello";
  EXPECT_GT(Arrived(queued[1]), 0);
  EXPECT_EQ(Arrived(queued[2]), 0) << "the third in the queue waits";
  for (int fd : {first, second}) close(fd);
  for (int fd : queued) close(fd);
}

TEST_F(TcpListenerTest, AFullListenerSleepsUntilAPlaceComesFreeOrTheGraceEnds) {
  Listen(TcpListener::Limits{/*max_pending=*/1, kLongGraceS, /*handshake_timeout_s=*/60});
  ASSERT_TRUE(loop_.Watch(listen_fd_).ok());
  const double before = NowSeconds();
  int first = Connect();
  int queued = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(queued, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)), 0);
  usleep(50000);
  listener_->Accept(listen_fd_, false, NowSeconds());
  EXPECT_FALSE(WakesFor(listen_fd_)) << "a full listener's socket, readable, would wake the thread at once";
  EXPECT_GE(listener_->WakeAt(), before + kLongGraceS) << "the thread wakes it when the first one's grace ends";
  EXPECT_LE(listener_->WakeAt(), NowSeconds() + kLongGraceS);
  listener_->Tick(NowSeconds());
  EXPECT_FALSE(WakesFor(listen_fd_)) << "within the grace";
  listener_->Tick(listener_->WakeAt());
  EXPECT_TRUE(WakesFor(listen_fd_)) << "the longest-waiting had its grace";
  EXPECT_EQ(listener_->WakeAt(), std::numeric_limits<double>::infinity());

  listener_->Accept(listen_fd_, false, NowSeconds());  // the first is within its grace again: paused
  EXPECT_FALSE(WakesFor(listen_fd_));
  close(first);  // the stranger leaves: its place comes free
  Serve([&] { return listener_->pending() == 0; });
  EXPECT_TRUE(WakesFor(listen_fd_)) << "a free place wakes the listener for its socket again";

  listener_->Accept(listen_fd_, false, NowSeconds());  // the queued one takes the place
  ASSERT_EQ(listener_->pending(), 1u);
  int last = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(last, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)), 0);
  usleep(50000);
  listener_->Accept(listen_fd_, false, NowSeconds());
  EXPECT_FALSE(WakesFor(listen_fd_));
  listener_->Tick(NowSeconds() + 61);  // the place's handshake timed out: closed, and its place free
  EXPECT_EQ(listener_->pending(), 0u);
  EXPECT_TRUE(WakesFor(listen_fd_)) << "a place freed by the handshake's timeout";
  close(queued);
  close(last);
}

// When every place is taken the listener says so, with how many may wait in the kernel's queue, and names
// net.core.somaxconn where the kernel gave a shorter queue than asked for.
TEST_F(TcpListenerTest, AFullListenerTellsHowLongItsQueueIsAndWhenTheKernelCutIt) {
  for (int queue : {4096, 128}) {
    TcpListener::Limits limits{/*max_pending=*/1, kLongGraceS, /*handshake_timeout_s=*/60};
    limits.queue_length = queue;
    limits.queue_length_wanted = 4096;
    Listen(limits);
    ::testing::internal::CaptureStderr();
    int first = Connect();  // takes the one place: the listener is full
    const std::string logged = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(logged.find("new connections wait their turn, " + std::to_string(queue) + " at most"),
              std::string::npos) << logged;
    EXPECT_EQ(logged.find("sysctl -w net.core.somaxconn=4096") != std::string::npos, queue < 4096) << logged;
    listener_->CloseAll();
    close(first);
  }
}

TEST_F(TcpListenerTest, AStoppingListenerTurnsEveryoneAway) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)), 0);
  usleep(50000);
  listener_->Accept(listen_fd_, /*stopping=*/true, NowSeconds());
  EXPECT_EQ(listener_->pending(), 0u);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
}

}  // namespace
}  // namespace bps

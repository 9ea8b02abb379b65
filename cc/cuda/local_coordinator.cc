#include "cc/cuda/local_coordinator.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/common/rank_list.h"
#include "cc/common/wire.h"
#include "cc/common/work_thread.h"
#include "cc/transport/stream_frames.h"

namespace bps {
namespace cuda {
namespace {

enum class Frame : uint8_t {
  kHello = 1,  // member -> root: its local rank
  kReady,      // member -> root: token
  kGo,         // root -> members: token, root's payload
  kError,      // root -> members: token (empty: the whole machine failed), message
};

constexpr int kPollMs = 100;

sockaddr_un SocketAddress(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (truncated to fit).
  std::string path = "bps_tf." + name;
  size_t n = std::min(path.size(), sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path + 1, path.data(), n);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return address;
}

// A process of this machine that stops reading (frozen, not dead) must not block the sender, which may
// hold the coordinator's lock, beyond the job's timeout: its sends then fail and the machine fails.
void LimitSendTime(int fd, double timeout_s) {
  timeval limit;
  limit.tv_sec = static_cast<time_t>(timeout_s);
  limit.tv_usec = static_cast<suseconds_t>((timeout_s - limit.tv_sec) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
}

Status SendFrame(int fd, Frame type, const std::string& first, const std::string& second = "") {
  WireWriter body;
  body.Put<uint8_t>(static_cast<uint8_t>(type));
  body.PutString(first);
  body.PutString(second);
  return SendAll(fd, Record(body.Take()), "local coordination socket");
}

// Reads the coordinator's messages, each a record (stream_frames.h) of its type and two strings.
class MessageReader {
 public:
  // Reads what is available; false when the peer closed the connection or it failed.
  bool Fill(int fd) { return records_.Fill(fd); }
  // The next complete frame, if any; false also for a malformed one (sets malformed()).
  bool Next(Frame* type, std::string* first, std::string* second) {
    const std::optional<std::string> record = records_.Next();
    if (!record) return false;
    WireReader r(*record);
    uint8_t raw = r.Get<uint8_t>();
    *first = r.GetString();
    *second = r.GetString();
    malformed_ = r.failed() || raw < 1 || raw > static_cast<uint8_t>(Frame::kError);
    *type = static_cast<Frame>(raw);
    return !malformed_;
  }
  bool malformed() const { return malformed_; }

 private:
  RecordReader records_;
  bool malformed_ = false;
};

// What both sides share: the runs this process ordered, per token in order, delivered on one thread.
class Runs {
 public:
  void Add(const std::string& token, LocalCoordinator::Run run) { pending_[token].push_back(std::move(run)); }
  // Delivers the oldest run of `token` (if this process ordered it).
  void Deliver(const std::string& token, const StatusOr<std::string>& result) {
    auto it = pending_.find(token);
    if (it == pending_.end() || it->second.empty()) return;
    LocalCoordinator::Run run = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) pending_.erase(it);
    delivery_.Post([run, result] { run(result); });
  }
  void DeliverNow(LocalCoordinator::Run run, const Status& error) {
    delivery_.Post([run, error] { run(StatusOr<std::string>(error)); });
  }
  void FailAll(const Status& error) {
    for (auto& entry : pending_) {
      for (auto& run : entry.second) DeliverNow(std::move(run), error);
    }
    pending_.clear();
  }
  void Stop() { delivery_.Stop(); }

 private:
  std::map<std::string, std::deque<LocalCoordinator::Run>> pending_;
  WorkThread delivery_;
};

// Both ends of the socket: the runs this process ordered, the failure that ends them all, the I/O thread.
class SocketEnd : public LocalCoordinator {
 public:
  void Order(const std::string& token, const std::string& payload, Run run) final {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return runs_.DeliverNow(std::move(run), failure_);
    runs_.Add(token, std::move(run));
    Ordered(token, payload);
  }

 protected:
  // With mu_ held: this process ordered `token` (rank 0 counts it, the others tell rank 0).
  virtual void Ordered(const std::string& token, const std::string& payload) = 0;
  virtual void Loop() = 0;

  // The last step of a derived constructor, and the first of its destructor (Loop uses its members).
  void StartIo() { io_ = std::thread([this] { Loop(); }); }
  void StopIo() {
    stop_ = true;
    io_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      runs_.FailAll(Aborted("local coordination stopped (shutdown)"));
    }
    runs_.Stop();
  }

  // With mu_ held. False if the coordination had failed already.
  bool FailAll(const Status& why) {
    if (!failure_.ok()) return false;
    failure_ = why;
    runs_.FailAll(why);
    return true;
  }

  std::atomic<bool> stop_{false};
  std::mutex mu_;
  Runs runs_;

 private:
  Status failure_;
  std::thread io_;
};

// Local rank 0: listens, matches tokens, announces them.
class Root : public SocketEnd {
 public:
  Root(int local_size, double timeout_s, int listener)
      : local_size_(local_size), timeout_s_(timeout_s), listener_(listener) {
    StartIo();
  }
  ~Root() override {
    StopIo();
    for (auto& peer : peers_) close(peer.fd);
    if (listener_ >= 0) close(listener_);
  }

 private:
  struct Peer {
    int fd;
    int rank = -1;  // known after HELLO
    MessageReader reader;
  };
  struct Pending {
    std::set<int> ready;
    std::string payload;
    double since = 0;
  };

  void Ordered(const std::string& token, const std::string& payload) override { Ready(0, token, &payload); }

  // With mu_ held. Local rank `rank` ordered `token` (payload from rank 0 only).
  void Ready(int rank, const std::string& token, const std::string* payload) {
    std::deque<Pending>& queue = pending_[token];
    auto entry = queue.begin();
    while (entry != queue.end() && entry->ready.count(rank)) ++entry;
    if (entry == queue.end()) {
      queue.push_back(Pending());
      entry = std::prev(queue.end());
      entry->since = NowSeconds();
    }
    entry->ready.insert(rank);
    if (payload) entry->payload = *payload;
    // The oldest completes first (a later entry holds only ranks the older ones hold).
    while (!queue.empty() && static_cast<int>(queue.front().ready.size()) == local_size_) {
      for (Peer& peer : peers_) {
        // A peer that cannot be written to is found lost by the loop reading its socket, which fails it.
        if (peer.rank > 0) SendFrame(peer.fd, Frame::kGo, token, queue.front().payload).IgnoreError();
      }
      runs_.Deliver(token, queue.front().payload);
      queue.pop_front();
    }
    if (queue.empty()) pending_.erase(token);
  }

  void Fail(const Status& why) {
    if (!FailAll(why)) return;
    for (Peer& peer : peers_) {
      if (peer.rank > 0) SendFrame(peer.fd, Frame::kError, "", why.message()).IgnoreError();  // failing anyway
    }
    pending_.clear();
  }

  void ExpireOld() {
    const double now = NowSeconds();
    for (auto it = pending_.begin(); it != pending_.end();) {
      std::deque<Pending>& queue = it->second;
      while (!queue.empty() && now - queue.front().since > timeout_s_) {
        std::set<int> missing;
        for (int r = 0; r < local_size_; ++r) {
          if (!queue.front().ready.count(r)) missing.insert(r);
        }
        std::ostringstream text;
        text << "local operation '" << it->first << "' was ready on local rank(s) " << RankList(queue.front().ready)
             << " of this machine but not on local rank(s) " << RankList(missing) << " within BYTEPS_TIMEOUT="
             << timeout_s_ << " s; every process of a machine must push_pull the same GPU tensors";
        Status error = DeadlineExceeded(text.str());
        for (Peer& peer : peers_) {
          if (queue.front().ready.count(peer.rank)) {
            SendFrame(peer.fd, Frame::kError, it->first, error.message()).IgnoreError();  // see Ready()
          }
        }
        if (queue.front().ready.count(0)) runs_.Deliver(it->first, error);
        queue.pop_front();
      }
      it = queue.empty() ? pending_.erase(it) : std::next(it);
    }
  }

  void Handle(Peer& peer, Frame type, const std::string& first) {
    if (type == Frame::kHello) {
      int rank = std::atoi(first.c_str());
      bool taken = false;
      for (const Peer& other : peers_) taken |= (other.rank == rank);
      if (rank <= 0 || rank >= local_size_ || taken) {
        return Fail(InvalidArgument("a process joined this machine's local coordination as local rank " + first +
                                    " (BYTEPS_LOCAL_SIZE=" + std::to_string(local_size_) +
                                    "): give each process of a machine its own BYTEPS_LOCAL_RANK"));
      }
      peer.rank = rank;
    } else if (type == Frame::kReady && peer.rank > 0) {
      Ready(peer.rank, first, nullptr);
    }
  }

  void Loop() override {
    double last_expiry = NowSeconds();
    while (!stop_) {
      std::vector<pollfd> fds;
      if (listener_ >= 0) fds.push_back({listener_, POLLIN, 0});
      size_t first_peer = fds.size();
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (Peer& peer : peers_) fds.push_back({peer.fd, POLLIN, 0});
      }
      int ready = poll(fds.data(), fds.size(), kPollMs);
      std::lock_guard<std::mutex> lock(mu_);
      if (ready > 0 && listener_ >= 0 && (fds[0].revents & POLLIN)) {
        int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          LimitSendTime(fd, timeout_s_);
          peers_.push_back(Peer{fd});
        }
      }
      for (size_t i = first_peer; ready > 0 && i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Peer& peer = peers_[i - first_peer];
        bool open = peer.reader.Fill(peer.fd);
        Frame type;
        std::string first, second;
        while (open && peer.reader.Next(&type, &first, &second)) Handle(peer, type, first);
        if (!open || peer.reader.malformed()) {
          Fail(Unavailable("local rank " + std::to_string(peer.rank) +
                           " of this machine exited or closed its local coordination connection"));
          close(peer.fd);
          peers_.erase(peers_.begin() + static_cast<long>(i - first_peer));
          break;  // indices moved; poll again
        }
      }
      if (NowSeconds() - last_expiry > 0.5) {
        ExpireOld();
        last_expiry = NowSeconds();
      }
    }
  }

  const int local_size_;
  const double timeout_s_;
  const int listener_;
  std::vector<Peer> peers_;
  std::map<std::string, std::deque<Pending>> pending_;
};

// Local ranks 1..n-1: send READY, run what rank 0 announces.
class Member : public SocketEnd {
 public:
  explicit Member(int fd) : fd_(fd) { StartIo(); }
  ~Member() override {
    StopIo();
    close(fd_);
  }

 private:
  void Ordered(const std::string& token, const std::string&) override {
    Status sent = SendFrame(fd_, Frame::kReady, token);
    if (!sent.ok()) FailAll(sent);
  }

  void Loop() override {
    MessageReader reader;
    while (!stop_) {
      pollfd fd{fd_, POLLIN, 0};
      if (poll(&fd, 1, kPollMs) <= 0) continue;
      bool open = reader.Fill(fd_);
      std::lock_guard<std::mutex> lock(mu_);
      Frame type;
      std::string first, second;
      while (open && reader.Next(&type, &first, &second)) {
        if (type == Frame::kGo) {
          runs_.Deliver(first, second);
        } else if (type == Frame::kError && first.empty()) {
          FailAll(Unavailable(second));
        } else if (type == Frame::kError) {
          runs_.Deliver(first, Status(Code::kDeadlineExceeded, second));
        }
      }
      if (!open || reader.malformed()) {
        FailAll(Unavailable("local rank 0 of this machine exited or closed its local coordination connection"));
        return;
      }
    }
  }

  const int fd_;
};

// With one process on the machine there is nothing to agree on: runs follow the calls.
class Alone : public LocalCoordinator {
 public:
  void Order(const std::string&, const std::string& payload, Run run) override {
    delivery_.Post([run, payload] { run(payload); });
  }

 private:
  WorkThread delivery_;
};

}  // namespace

std::string LocalCoordinatorName(const std::string& root_uri, int root_port, int worker_id) {
  return root_uri + ":" + std::to_string(root_port) + "/machine" + std::to_string(worker_id);
}

StatusOr<std::unique_ptr<LocalCoordinator>> LocalCoordinator::Connect(const std::string& name, int local_rank,
                                                                       int local_size, double timeout_s) {
  if (local_rank < 0 || local_rank >= local_size) {
    return InvalidArgument("BYTEPS_LOCAL_RANK=" + std::to_string(local_rank) + " is outside BYTEPS_LOCAL_SIZE=" +
                           std::to_string(local_size));
  }
  if (local_size == 1) return std::unique_ptr<LocalCoordinator>(new Alone());
  socklen_t length;
  sockaddr_un address = SocketAddress(name, &length);
  auto new_socket = [] { return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); };
  int fd = new_socket();
  if (fd < 0) return Internal(std::string("socket(AF_UNIX): ") + std::strerror(errno));
  if (local_rank == 0) {
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, local_size) != 0) {
      std::string why = std::strerror(errno);
      close(fd);
      return Unavailable("local rank 0 cannot listen for this machine's other processes (" + why +
                         "): is another job with the same DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT and DMLC_WORKER_ID "
                         "running on this machine?");
    }
    return std::unique_ptr<LocalCoordinator>(new Root(local_size, timeout_s, fd));
  }
  const double deadline = NowSeconds() + timeout_s;
  while (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    close(fd);
    if (NowSeconds() > deadline) {
      return DeadlineExceeded("local rank 0 of this machine did not start its GPU coordination within "
                              "BYTEPS_TIMEOUT=" + std::to_string(timeout_s) +
                              " s; every process of a machine must push_pull GPU tensors");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fd = new_socket();  // rank 0 is not listening yet: try again with a fresh socket
    if (fd < 0) return Internal(std::string("socket(AF_UNIX): ") + std::strerror(errno));
  }
  LimitSendTime(fd, timeout_s);
  Status hello = SendFrame(fd, Frame::kHello, std::to_string(local_rank));
  if (!hello.ok()) {
    close(fd);
    return hello;
  }
  return std::unique_ptr<LocalCoordinator>(new Member(fd));
}

}  // namespace cuda
}  // namespace bps

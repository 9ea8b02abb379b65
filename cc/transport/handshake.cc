#include "cc/transport/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace bps {
namespace {

constexpr char kMagic[kMagicBytes + 1] = "bps_tf\x01\n";  // the protocol's name and version
constexpr char kAccepted = 0;
constexpr char kRejected = 1;

bool HasMagic(const std::string& bytes) { return bytes.compare(0, kMagicBytes, kMagic, kMagicBytes) == 0; }

// Waits until `fd` is ready for `events`, or the deadline.
Status WaitFor(int fd, short events, const Deadline& deadline) {
  while (true) {
    double left = deadline.remaining();
    if (left <= 0) return DeadlineExceeded("the peer did not complete the bps_tf handshake in time");
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (n > 0) return Status::OK();
    if (n < 0 && errno != EINTR) return Unavailable(std::string("poll: ") + std::strerror(errno));
  }
}

Status SendAll(int fd, const std::string& bytes, const Deadline& deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      BPS_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline));
    } else {
      return Unavailable(std::string("the connection broke during the handshake: ") + std::strerror(errno));
    }
  }
  return Status::OK();
}

Status ReceiveExactly(int fd, size_t length, std::string* out, const Deadline& deadline) {
  out->assign(length, '\0');
  size_t done = 0;
  while (done < length) {
    ssize_t n = recv(fd, &(*out)[done], length - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return Unavailable("the peer closed the connection during the handshake");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      BPS_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline));
    } else {
      return Unavailable(std::string("the connection broke during the handshake: ") + std::strerror(errno));
    }
  }
  return Status::OK();
}

template <typename Array>
void Take(const std::string& bytes, size_t offset, Array* out) {
  std::memcpy(out->data(), bytes.data() + offset, out->size());
}

template <typename Array>
void Append(std::string* bytes, const Array& in) {
  bytes->append(reinterpret_cast<const char*>(in.data()), in.size());
}

}  // namespace

StatusOr<std::string> ClientHandshake::Answer(const std::string& hello) {
  if (hello.size() != kServerHelloBytes || !HasMagic(hello)) {
    return Unauthenticated("the peer is not a bps_tf process (it does not speak its protocol)");
  }
  Take(hello, kMagicBytes, &server_nonce_);
  client_nonce_ = FreshNonce();
  std::string answer(kMagic, kMagicBytes);
  Append(&answer, client_nonce_);
  Append(&answer, secret_.Prove(Side::kClient, server_nonce_, client_nonce_));
  return answer;
}

Status ClientHandshake::Check(const std::string& verdict) const {
  if (verdict.empty() || verdict[0] != kAccepted) {
    return Unauthenticated("the peer rejected this process: it belongs to another job, or the job secrets differ "
                           "(every process of a job needs the same BYTEPS_JOB_SECRET)");
  }
  Proof proof;
  if (verdict.size() != kVerdictBytes) return Unauthenticated("the peer's verdict is malformed");
  Take(verdict, 1, &proof);
  if (!secret_.Verify(Side::kServer, server_nonce_, client_nonce_, proof)) {
    return Unauthenticated("the peer could not prove it belongs to this job (its job secret differs)");
  }
  return Status::OK();
}

Status RunClientHandshake(int fd, const JobSecret& secret, const Deadline& deadline) {
  ClientHandshake handshake(secret);
  std::string hello;
  BPS_RETURN_IF_ERROR(ReceiveExactly(fd, kServerHelloBytes, &hello, deadline));
  auto answer = handshake.Answer(hello);
  if (!answer.ok()) return answer.status();
  BPS_RETURN_IF_ERROR(SendAll(fd, answer.value(), deadline));
  std::string verdict;
  BPS_RETURN_IF_ERROR(ReceiveExactly(fd, 1, &verdict, deadline));
  if (verdict[0] == kAccepted) {
    std::string proof;
    BPS_RETURN_IF_ERROR(ReceiveExactly(fd, kProofBytes, &proof, deadline));
    verdict += proof;
  }
  return handshake.Check(verdict);
}

ServerHandshake::ServerHandshake(const JobSecret& secret) : secret_(secret), nonce_(FreshNonce()) {
  hello_.assign(kMagic, kMagicBytes);
  Append(&hello_, nonce_);
}

ServerHandshake::Result ServerHandshake::Feed(const char* data, size_t length, std::string* reply, std::string* why) {
  received_.append(data, length);
  if (received_.size() < kClientProofBytes) {
    if (received_.size() >= kMagicBytes && !HasMagic(received_)) {
      *why = "it does not speak the bps_tf protocol";
      *reply = std::string(1, kRejected);
      return Result::kRejected;
    }
    return Result::kNeedMore;
  }
  *reply = std::string(1, kRejected);
  if (received_.size() > kClientProofBytes || !HasMagic(received_)) {
    *why = "it does not speak the bps_tf protocol";
    return Result::kRejected;
  }
  Nonce client_nonce;
  Proof proof;
  Take(received_, kMagicBytes, &client_nonce);
  Take(received_, kMagicBytes + kNonceBytes, &proof);
  if (!secret_.Verify(Side::kClient, nonce_, client_nonce, proof)) {
    *why = "it does not hold this job's secret";
    return Result::kRejected;
  }
  *reply = std::string(1, kAccepted);
  Append(reply, secret_.Prove(Side::kServer, nonce_, client_nonce));
  return Result::kAccepted;
}

}  // namespace bps

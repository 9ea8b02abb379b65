// The first exchange on every bps_tf connection: both ends prove they hold the job's secret (job_auth.h)
// before anything else is taken from them. The accepting side sends a magic and its nonce (40 bytes); the
// connecting side answers with a magic, its nonce and its proof (72 bytes); the accepting side replies with
// a verdict byte, and its own proof when it accepts (33 bytes), or closes after the byte when it rejects.
// Fixed sizes only: no length from an unauthenticated peer is ever used. The TCP transport carries these
// bytes on the socket itself, the UCX transport in active messages.
#pragma once

#include <string>

#include "cc/common/clock.h"
#include "cc/common/status.h"
#include "cc/transport/job_auth.h"

namespace bps {

constexpr size_t kMagicBytes = 8;
constexpr size_t kServerHelloBytes = kMagicBytes + kNonceBytes;
constexpr size_t kClientProofBytes = kMagicBytes + kNonceBytes + kProofBytes;
constexpr size_t kVerdictBytes = 1 + kProofBytes;

// The connecting side's two steps.
class ClientHandshake {
 public:
  explicit ClientHandshake(const JobSecret& secret) : secret_(secret) {}
  // The answer to the accepting side's hello, or kUnauthenticated when it is not a bps_tf hello.
  StatusOr<std::string> Answer(const std::string& hello);
  // OK when the verdict accepts us and proves the accepting side holds the secret; kUnauthenticated when
  // it rejects us or cannot prove it.
  Status Check(const std::string& verdict) const;

 private:
  const JobSecret& secret_;
  Nonce server_nonce_{}, client_nonce_{};
};

// The connecting side over a connected non-blocking socket; blocks (polling) until `deadline`.
// kUnauthenticated: the peer is not a member of this job (or rejected our proof): retrying will not help.
// kUnavailable / kDeadlineExceeded: the connection broke or stalled.
Status RunClientHandshake(int fd, const JobSecret& secret, const Deadline& deadline);

// The accepting side, fed by the transport's thread as bytes arrive.
class ServerHandshake {
 public:
  enum class Result { kNeedMore, kAccepted, kRejected };

  explicit ServerHandshake(const JobSecret& secret);

  // What to send as soon as the connection is accepted.
  const std::string& hello() const { return hello_; }
  // Takes bytes from the connecting side. On kAccepted or kRejected, `reply` is what to send before going
  // on (or closing), and `why` says what was wrong (kRejected).
  Result Feed(const char* data, size_t length, std::string* reply, std::string* why);

 private:
  const JobSecret& secret_;
  Nonce nonce_;
  std::string hello_;
  std::string received_;
};

}  // namespace bps

// Frames on a byte stream (a TCP connection, a Unix socket). What every reader and writer of such a stream
// shares: taking what a socket has now (ReceiveSome), writing a whole small message on a blocking socket
// (SendAll), and records, the plain framing of small control messages: a u32 length (little-endian), then
// that many bytes. The TCP transport's data frames (tcp_frames.h) read through ReceiveSome; the local
// coordination of a machine's GPU processes (cc/cuda/local_coordinator) speaks in records.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "cc/common/status.h"

namespace bps {

// Up to `capacity` (> 0) bytes of what `fd` has now, into `into`: how many (0: none now, the socket would
// block), or an error when the peer closed the stream or it broke.
inline StatusOr<size_t> ReceiveSome(int fd, void* into, size_t capacity) {
  while (true) {
    const ssize_t n = recv(fd, into, capacity, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return Unavailable("the peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return Unavailable(std::string("connection broke: ") + std::strerror(errno));
  }
}

// Writes all of `bytes` to a blocking socket (SO_SNDTIMEO bounds how long); `what` names the stream in errors.
inline Status SendAll(int fd, const std::string& bytes, const std::string& what) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(what + ": " + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  return Status::OK();
}

// `body` as a record.
inline std::string Record(const std::string& body) {
  const uint32_t length = static_cast<uint32_t>(body.size());
  std::string record(sizeof(length), '\0');
  std::memcpy(record.data(), &length, sizeof(length));
  return record + body;
}

// Cuts the bytes of a stream into records.
class RecordReader {
 public:
  // Takes what `fd` has now; false when the peer closed the stream or it broke.
  bool Fill(int fd) {
    char chunk[4096];
    auto n = ReceiveSome(fd, chunk, sizeof(chunk));
    if (!n.ok()) return false;
    buffer_.append(chunk, n.value());
    return true;
  }
  // Bytes that arrived some other way (for tests).
  void Feed(const std::string& bytes) { buffer_ += bytes; }

  // The next whole record, once it has arrived.
  std::optional<std::string> Next() {
    uint32_t length;
    if (buffer_.size() < sizeof(length)) return std::nullopt;
    std::memcpy(&length, buffer_.data(), sizeof(length));
    if (buffer_.size() < sizeof(length) + length) return std::nullopt;
    std::string record = buffer_.substr(sizeof(length), length);
    buffer_.erase(0, sizeof(length) + length);
    return record;
  }

 private:
  std::string buffer_;
};

}  // namespace bps

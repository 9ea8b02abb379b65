// The byte stream of an authenticated bps_tf TCP connection: frames of a 12-byte prefix (header length:
// u32, payload length: u64, little-endian), the header, then the payload. A prefix of zeros is a heartbeat.
// FrameReader parses what a socket delivers; FrameWriter queues frames and writes as much as the socket
// takes. Both run on the connection's I/O thread, never block, and never trust a length from the wire:
// a header longer than kMaxHeaderBytes ends the connection, and a payload lands only where the owner says
// (exactly its declared length) or is read and dropped piecewise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "cc/common/status.h"

namespace bps {

constexpr size_t kFramePrefixBytes = 12;
constexpr uint32_t kMaxHeaderBytes = 16u << 20;
constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 40;

// The prefix of a frame with this header and payload length.
std::string FramePrefix(uint32_t header_bytes, uint64_t payload_bytes);

class FrameReader {
 public:
  class Sink {
   public:
    virtual ~Sink() = default;
    // Where `length` (> 0) payload bytes of the frame with this header go, or nullptr to drop them.
    virtual void* Destination(const std::string& header, size_t length) = 0;
    // A whole frame arrived (payload null when dropped or absent).
    virtual void Frame(const std::string& header, void* payload, size_t length) = 0;
  };

  FrameReader() : buffer_(kBufferBytes) {}

  // Reads what `fd` has now, at most about `budget` bytes (so one busy connection cannot starve the
  // others), delivering whole frames to `sink`. Returns OK when the socket has nothing more (or the budget
  // is spent), and an error when the stream is malformed, closed or broken.
  Status ReadFrom(int fd, Sink& sink, size_t budget = 8 << 20);

  // Parses bytes already in hand (for tests): as ReadFrom, without a socket.
  Status Feed(const char* data, size_t length, Sink& sink);

 private:
  static constexpr size_t kBufferBytes = 64 << 10;
  // After a payload of at least this many bytes, a read stops at the end of the next frame's header
  // (guessed as long as the last one), so that the next payload, likely as large, is received straight
  // into its destination instead of into the buffer and copied from there. Smaller frames are read many
  // per call.
  static constexpr uint64_t kLargePayloadBytes = 16 << 10;
  enum class Stage { kPrefix, kHeader, kPayload };

  size_t buffered() const { return end_ - begin_; }
  // Parses as much of the buffer as forms frames.
  Status Consume(Sink& sink);
  // How many bytes the next read into the buffer may take.
  size_t ReadLimit() const;

  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  Stage stage_ = Stage::kPrefix;
  uint32_t header_bytes_ = 0;
  uint64_t payload_bytes_ = 0;
  std::string header_;
  char* destination_ = nullptr;  // null while a payload is being dropped
  uint64_t payload_done_ = 0;
  bool expect_large_ = false;  // the last payload was large
};

class FrameWriter {
 public:
  using Done = std::function<void(const Status&)>;

  // Queues a frame; `payload` must stay valid until `done` runs.
  void Queue(std::string header, const void* payload, size_t length, Done done);
  void QueueHeartbeat() { Queue(std::string(), nullptr, 0, nullptr); }
  bool empty() const { return frames_.empty(); }

  // Writes what `fd` takes now; runs `done` of every frame written completely. OK also when the socket is
  // full (the rest waits for the next call); an error when the connection broke.
  Status WriteTo(int fd);
  // Fails every queued frame (the connection is gone).
  void FailAll(const Status& why);

 private:
  struct Frame {
    char prefix[kFramePrefixBytes];  // (kept apart from the header, which is moved in, not copied)
    std::string header;
    const char* payload;
    size_t length;
    size_t written;  // of prefix, header and payload
    Done done;
  };
  std::deque<Frame> frames_;
};

}  // namespace bps

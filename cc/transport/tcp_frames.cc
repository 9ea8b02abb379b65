#include "cc/transport/tcp_frames.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cc/transport/stream_frames.h"

namespace bps {

namespace {

void PutFramePrefix(char* to, uint32_t header_bytes, uint64_t payload_bytes) {
  std::memcpy(to, &header_bytes, sizeof(header_bytes));
  std::memcpy(to + sizeof(header_bytes), &payload_bytes, sizeof(payload_bytes));
}

}  // namespace

std::string FramePrefix(uint32_t header_bytes, uint64_t payload_bytes) {
  std::string prefix(kFramePrefixBytes, '\0');
  PutFramePrefix(prefix.data(), header_bytes, payload_bytes);
  return prefix;
}

Status FrameReader::Consume(Sink& sink) {
  while (true) {
    switch (stage_) {
      case Stage::kPrefix: {
        if (buffered() < kFramePrefixBytes) return Status::OK();
        std::memcpy(&header_bytes_, &buffer_[begin_], sizeof(header_bytes_));
        std::memcpy(&payload_bytes_, &buffer_[begin_ + sizeof(header_bytes_)], sizeof(payload_bytes_));
        begin_ += kFramePrefixBytes;
        if (header_bytes_ == 0 && payload_bytes_ == 0) break;  // a heartbeat
        if (header_bytes_ == 0 || header_bytes_ > kMaxHeaderBytes || payload_bytes_ > kMaxPayloadBytes) {
          return InvalidArgument("malformed frame (header of " + std::to_string(header_bytes_) + " bytes, payload of " +
                                 std::to_string(payload_bytes_) + ")");
        }
        header_.clear();
        stage_ = Stage::kHeader;
        break;
      }
      case Stage::kHeader: {
        size_t take = std::min<size_t>(buffered(), header_bytes_ - header_.size());
        header_.append(&buffer_[begin_], take);
        begin_ += take;
        if (header_.size() < header_bytes_) return Status::OK();
        if (payload_bytes_ == 0) {
          stage_ = Stage::kPrefix;
          expect_large_ = false;
          sink.Frame(header_, nullptr, 0);
          break;
        }
        destination_ = static_cast<char*>(sink.Destination(header_, payload_bytes_));
        payload_done_ = 0;
        stage_ = Stage::kPayload;
        break;
      }
      case Stage::kPayload: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(buffered(), payload_bytes_ - payload_done_));
        if (destination_ != nullptr && take > 0) std::memcpy(destination_ + payload_done_, &buffer_[begin_], take);
        begin_ += take;
        payload_done_ += take;
        if (payload_done_ < payload_bytes_) return Status::OK();
        stage_ = Stage::kPrefix;
        expect_large_ = payload_bytes_ >= kLargePayloadBytes;
        sink.Frame(header_, destination_, payload_bytes_);
        break;
      }
    }
  }
}

Status FrameReader::Feed(const char* data, size_t length, Sink& sink) {
  while (length > 0) {
    if (begin_ == end_) begin_ = end_ = 0;
    if (end_ == buffer_.size()) {  // compact
      std::memmove(buffer_.data(), &buffer_[begin_], buffered());
      end_ -= begin_;
      begin_ = 0;
    }
    size_t take = std::min(length, buffer_.size() - end_);
    std::memcpy(&buffer_[end_], data, take);
    end_ += take;
    data += take;
    length -= take;
    BPS_RETURN_IF_ERROR(Consume(sink));
  }
  return Status::OK();
}

size_t FrameReader::ReadLimit() const {
  const size_t room = buffer_.size() - end_;
  if (!expect_large_) return room;
  switch (stage_) {
    case Stage::kPrefix:  // the last frame's header length stands in for this one's, still unknown
      return std::min(room, kFramePrefixBytes + std::max<size_t>(header_.size(), 1) - buffered());
    case Stage::kHeader:
      return std::min(room, header_bytes_ - header_.size() - buffered());
    case Stage::kPayload:
      return room;
  }
  return room;
}

Status FrameReader::ReadFrom(int fd, Sink& sink, size_t budget) {
  size_t total = 0;
  while (total < budget) {
    BPS_RETURN_IF_ERROR(Consume(sink));
    // A large payload goes straight to its destination, without passing through the buffer.
    const bool direct = stage_ == Stage::kPayload && destination_ != nullptr && buffered() == 0;
    if (!direct) {
      if (begin_ == end_) begin_ = end_ = 0;
      if (end_ == buffer_.size()) {
        std::memmove(buffer_.data(), &buffer_[begin_], buffered());
        end_ -= begin_;
        begin_ = 0;
      }
    }
    auto n = direct ? ReceiveSome(fd, destination_ + payload_done_, static_cast<size_t>(payload_bytes_ - payload_done_))
                    : ReceiveSome(fd, &buffer_[end_], ReadLimit());
    if (!n.ok()) return n.status();
    if (n.value() == 0) break;  // nothing more now
    if (direct) {
      payload_done_ += n.value();
    } else {
      end_ += n.value();
    }
    total += n.value();
  }
  return Consume(sink);
}

void FrameWriter::Queue(std::string header, const void* payload, size_t length, Done done) {
  Frame f{{}, std::move(header), static_cast<const char*>(payload), length, 0, std::move(done)};
  PutFramePrefix(f.prefix, static_cast<uint32_t>(f.header.size()), length);
  frames_.push_back(std::move(f));
}

Status FrameWriter::WriteTo(int fd) {
  constexpr size_t kMaxVectors = 96;
  while (!frames_.empty()) {
    iovec vectors[kMaxVectors];
    size_t count = 0;
    for (const Frame& f : frames_) {
      if (count + 3 > kMaxVectors) break;
      size_t skip = f.written;
      // The frame's unwritten part of each of its pieces, in order.
      for (const auto& [data, size] : {std::pair<const char*, size_t>{f.prefix, kFramePrefixBytes},
                                       {f.header.data(), f.header.size()}, {f.payload, f.length}}) {
        if (skip >= size) {
          skip -= size;
          continue;
        }
        vectors[count++] = {const_cast<char*>(data) + skip, size - skip};
        skip = 0;
      }
    }
    msghdr message{};
    message.msg_iov = vectors;
    message.msg_iovlen = count;
    ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
      Status broken = Unavailable(std::string("connection broke: ") + std::strerror(errno));
      FailAll(broken);
      return broken;
    }
    size_t left = static_cast<size_t>(n);
    while (!frames_.empty()) {
      Frame& f = frames_.front();
      const size_t total = kFramePrefixBytes + f.header.size() + f.length;
      size_t used = std::min(left, total - f.written);
      f.written += used;
      left -= used;
      if (f.written < total) break;
      Done done = std::move(f.done);
      frames_.pop_front();
      if (done) done(Status::OK());
    }
  }
  return Status::OK();
}

void FrameWriter::FailAll(const Status& why) {
  std::deque<Frame> failed;
  failed.swap(frames_);
  for (Frame& f : failed) {
    if (f.done) f.done(why);
  }
}

}  // namespace bps

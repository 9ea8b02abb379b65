#include "cc/transport/stream_frames.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace bps {
namespace {

// A connected pair of Unix stream sockets, closed at the end.
struct SocketPair {
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0); }
  ~SocketPair() {
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
  }
  int fds[2] = {-1, -1};
};

TEST(StreamFramesTest, RecordsArriveWholeAndInOrderHoweverTheBytesAreCut) {
  RecordReader reader;
  const std::string bytes = Record("first") + Record("") + Record(std::string(5000, 'x'));
  for (size_t i = 0; i < bytes.size(); i += 7) reader.Feed(bytes.substr(i, 7));
  EXPECT_EQ(reader.Next(), "first");
  EXPECT_EQ(reader.Next(), "");
  EXPECT_EQ(reader.Next(), std::string(5000, 'x'));
  EXPECT_FALSE(reader.Next());
}

TEST(StreamFramesTest, AHalfRecordWaitsForTheRest) {
  RecordReader reader;
  const std::string record = Record("hello");
  reader.Feed(record.substr(0, 6));
  EXPECT_FALSE(reader.Next());
  reader.Feed(record.substr(6));
  EXPECT_EQ(reader.Next(), "hello");
}

TEST(StreamFramesTest, RecordsCrossASocket) {
  SocketPair pair;
  ASSERT_TRUE(SendAll(pair.fds[0], Record("over") + Record("the wire"), "test socket").ok());
  RecordReader reader;
  ASSERT_TRUE(reader.Fill(pair.fds[1]));
  EXPECT_EQ(reader.Next(), "over");
  EXPECT_EQ(reader.Next(), "the wire");
}

TEST(StreamFramesTest, ReceiveSomeTellsNothingNowFromClosed) {
  SocketPair pair;
  char buffer[16];
  auto nothing = ReceiveSome(pair.fds[1], buffer, sizeof(buffer));
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(nothing.value(), 0u) << "an empty non-blocking socket has nothing now";
  close(pair.fds[0]);
  pair.fds[0] = -1;
  auto closed = ReceiveSome(pair.fds[1], buffer, sizeof(buffer));
  EXPECT_EQ(closed.status().code(), Code::kUnavailable);
  RecordReader reader;
  EXPECT_FALSE(reader.Fill(pair.fds[1]));
}

}  // namespace
}  // namespace bps

#include "cc/common/timeline.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cc/common/clock.h"

namespace bps {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

TEST(TimelineTest, OffRecordsNothingAndOnWritesACompleteTrace) {
  const std::string path = ::testing::TempDir() + "/timeline/3/comm.json";
  Timeline timeline;
  timeline.Span("ignored", "PUSH", 1, 2);
  ASSERT_TRUE(timeline.Start(path, 3).ok());
  const double now = NowSeconds();
  timeline.Span("grad/\"kernel\"\n", "PUSH", now, now + 0.002, "partition 0");
  timeline.Span("grad/\"kernel\"\n", "SUM_PULL", now + 0.002, now + 0.005);
  timeline.Span("grad/bias", "QUEUE", now, now);
  timeline.Stop();
  timeline.Span("after", "PUSH", now, now + 1);
  const std::string trace = ReadFile(path);
  EXPECT_EQ(trace.front(), '[');
  EXPECT_NE(trace.find("\n]\n"), std::string::npos);
  EXPECT_EQ(trace.find("ignored"), std::string::npos);
  EXPECT_EQ(trace.find("after"), std::string::npos);
  EXPECT_NE(trace.find("\"name\":\"worker 3\""), std::string::npos);
  EXPECT_NE(trace.find("grad/\\\"kernel\\\"\\u000a"), std::string::npos) << trace;  // escaped
  EXPECT_NE(trace.find("\"dur\":2000.000"), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"detail\":\"partition 0\""), std::string::npos);
  // One row per tensor, announced once.
  size_t rows = 0;
  for (size_t at = trace.find("thread_name"); at != std::string::npos; at = trace.find("thread_name", at + 1)) ++rows;
  EXPECT_EQ(rows, 2u);
}

TEST(TimelineTest, AnUnwritablePathIsAnError) {
  Timeline timeline;
  Status s = timeline.Start("/proc/no/such/dir/comm.json", 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write the timeline"), std::string::npos);
  EXPECT_FALSE(timeline.on());
}

}  // namespace
}  // namespace bps

#include "cc/transport/ucx_policy.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

TEST(UcxPolicyTest, GpuCopyTransportsKeepEagerPayloadsBetweenHosts) {
  Config config;
  config.ucx_tls = "tcp,cuda_copy,cuda_ipc";
  EXPECT_EQ(UcxOptionsFor(config, {}).eager, EagerPayloads::kBetweenHosts);
  config.ucx_tls = "rc_x,sm,self";
  EXPECT_EQ(UcxOptionsFor(config, {}).eager, EagerPayloads::kNever);
}

TEST(UcxPolicyTest, WatchedLinksAreProbedWellWithinTheTimeout) {
  Config config;
  config.timeout_s = 20;
  EXPECT_DOUBLE_EQ(UcxOptionsFor(config, {}).keepalive_interval_s, 5);
  config.timeout_s = 300;
  EXPECT_DOUBLE_EQ(UcxOptionsFor(config, {}).keepalive_interval_s, 20);
  config.timeout_s = 2;
  EXPECT_DOUBLE_EQ(UcxOptionsFor(config, {}).keepalive_interval_s, 1);
  EXPECT_EQ(UcxOptionsFor(config, {{"UCX_KEEPALIVE_INTERVAL", "3s"}}).keepalive_interval_s, 0);  // the user's
}

TEST(UcxPolicyTest, TcpSocketsGetASmallSendBufferUnlessTheUserSetOneOrRdmaIsOn) {
  Config config;
  EXPECT_EQ(UcxOptionsFor(config, {}).tcp_send_buffer_bytes, 65536u);
  EXPECT_EQ(UcxOptionsFor(config, {{"UCX_TCP_SNDBUF", "1m"}}).tcp_send_buffer_bytes, 0u);
  config.enable_rdma = true;
  EXPECT_EQ(UcxOptionsFor(config, {}).tcp_send_buffer_bytes, 0u);
}

}  // namespace
}  // namespace bps

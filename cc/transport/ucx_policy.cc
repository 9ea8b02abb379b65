#include "cc/transport/ucx_policy.h"

#include <algorithm>

namespace bps {

constexpr double kUcxKeepaliveDefaultS = 20;  // UCX 1.13's own UCX_KEEPALIVE_INTERVAL
constexpr size_t kTcpSendBufferBytes = 64 << 10;  // the kernel doubles it; sizes measured: docs/performance.md

UcxOptions UcxOptionsFor(const Config& config, const Environment& env) {
  UcxOptions options;
  if (!config.ucx_tls.empty()) {
    options.tls = config.ucx_tls;
  } else if (!config.enable_rdma && config.user_ucx_tls.empty()) {
    options.tls = "tcp,sm,self";
  }
  // Between hosts over TCP, eager beats rendezvous (see EagerPayloads); RDMA keeps its zero-copy rendezvous.
  const bool rdma = config.rdma();
  options.eager = rdma ? EagerPayloads::kNever : EagerPayloads::kBetweenHosts;
  // A dead peer must be reported well within BYTEPS_TIMEOUT, even when UCX misses its socket closing.
  if (!env.count("UCX_KEEPALIVE_INTERVAL")) {
    options.keepalive_interval_s = std::max(1.0, std::min(kUcxKeepaliveDefaultS, config.timeout_s / 4));
  }
  // Over TCP, bytes in a socket's buffer are out of our hands: with the kernel's autotuning (megabytes)
  // the sums of a worker's last slices waited behind tens of milliseconds of queued pushes.
  if (!rdma && !env.count("UCX_TCP_SNDBUF")) options.tcp_send_buffer_bytes = kTcpSendBufferBytes;
  return options;
}

}  // namespace bps

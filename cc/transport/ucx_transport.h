// Transport over UCX's ucp active messages, for RDMA (rc/ud/dc) where the hardware has it; TCP and shared
// memory too. One thread owns the ucp worker; other threads hand it work through a queue.
//
// Every connection proves it holds the job's secret (handshake.h, carried in active messages) before any
// other message from it is delivered. UCX's own connection set-up parses bytes before that proof, and UCX
// (1.13 and later) can be crashed by crafted bytes on its listening ports: keep UCX jobs on a trusted
// fabric (docs/security.md). bps_tf's TCP transport has no such exposure.
#pragma once

#include <memory>
#include <string>

#include "cc/transport/job_auth.h"
#include "cc/transport/transport.h"

namespace bps {

// When large payloads use UCX's eager protocol instead of letting UCX pick rendezvous. Over TCP between
// hosts eager is faster: a rendezvous needs control messages that queue behind data in the link's buffers
// (measured on an emulated 1 Gbit/s link: docs/performance.md). Within a host and over RDMA, rendezvous
// (one copy, or zero) is better.
enum class EagerPayloads { kNever, kBetweenHosts, kAlways };

struct UcxOptions {
  JobSecret secret;
  // UCX transport list (UCX_TLS syntax). Empty keeps UCX's own choice (UCX_TLS from the environment,
  // else every transport UCX finds).
  std::string tls;
  EagerPayloads eager = EagerPayloads::kNever;
  // How often UCX probes watched links (UCX_KEEPALIVE_INTERVAL); 0 keeps UCX's setting. A peer that dies is
  // normally seen at once, by its socket closing; the probe is the fallback when that event is missed.
  double keepalive_interval_s = 0;
  // SO_SNDBUF of UCX's TCP sockets (UCX_TCP_SNDBUF); 0 keeps the kernel's autotuning. Bytes written to a
  // socket count as sent: a small buffer keeps them in our credit window, where priority still orders them.
  size_t tcp_send_buffer_bytes = 0;
};

StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(const UcxOptions& options);

}  // namespace bps

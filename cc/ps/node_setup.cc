#include "cc/ps/node_setup.h"

#include <algorithm>
#include <sstream>

#include "cc/transport/address.h"

namespace bps {

constexpr double kUcxKeepaliveDefaultS = 20;  // UCX 1.13's own UCX_KEEPALIVE_INTERVAL
constexpr size_t kTcpSendBufferBytes = 64 << 10;  // the kernel doubles it; sizes measured: docs/performance.md

StatusOr<std::string> AdvertisedHost(const Config& config) {
  if (!config.node_host.empty()) return config.node_host;
  if (!config.interface.empty()) return InterfaceAddress(config.interface);
  if (config.role == Role::kScheduler) return config.root_uri;
  return RouteSourceAddress(config.root_uri, config.root_port);
}

// Whole names only: "cuda_copy" is not "ud".
bool ListsRdmaTransport(const std::string& tls) {
  if (!tls.empty() && tls[0] == '^') return false;  // an exclusion list names what is not used
  std::stringstream names(tls);
  for (std::string name; std::getline(names, name, ',');) {
    if (name == "ib") return true;
    for (const char* family : {"rc", "ud", "dc"}) {
      if (name.rfind(family, 0) == 0 && (name.size() == 2 || name[2] == '_')) return true;
    }
  }
  return false;
}

UcxOptions UcxOptionsFor(const Config& config, const Environment& env) {
  UcxOptions options;
  if (!config.ucx_tls.empty()) {
    options.tls = config.ucx_tls;
  } else if (!config.enable_rdma && !env.count("UCX_TLS")) {
    options.tls = "tcp,sm,self";
  }
  // Between hosts over TCP, eager beats rendezvous (see EagerPayloads); RDMA keeps its zero-copy rendezvous.
  const std::string& tls = options.tls.empty() ? (env.count("UCX_TLS") ? env.at("UCX_TLS") : "") : options.tls;
  bool rdma = config.enable_rdma || ListsRdmaTransport(tls);
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

Status JoinJob(const Config& config, Transport* transport, PeerId* scheduler) {
  auto host = AdvertisedHost(config);
  if (!host.ok()) return host.status();
  auto listening = transport->Listen(host.value(), 0);
  if (!listening.ok()) {
    return Status(listening.status().code(), listening.status().message() +
                                                 " (set DMLC_NODE_HOST or DMLC_INTERFACE to an address of this machine)");
  }
  std::string root = config.root_uri + ":" + std::to_string(config.root_port);
  auto peer = transport->Connect(root, config.timeout_s, Link::kControl);
  if (!peer.ok()) {
    return Status(peer.status().code(), "cannot reach the scheduler at " + root + " (DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT): " +
                                            peer.status().message());
  }
  *scheduler = peer.value();
  RegisterBody body;
  body.role = static_cast<int32_t>(config.role);
  body.worker_id = config.worker_id;
  body.local_rank = config.local_rank;
  body.local_size = config.local_size;
  body.num_worker = config.num_worker;
  body.num_server = config.num_server;
  body.address = listening.value();
  Message m;
  m.type = MessageType::kRegister;
  m.text = body.Encode();
  transport->Send(*scheduler, m.Encode(), nullptr, 0, nullptr);
  return Status::OK();
}

}  // namespace bps

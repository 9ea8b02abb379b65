#include "cc/ps/node_setup.h"

#include "cc/transport/address.h"

namespace bps {

StatusOr<std::string> AdvertisedHost(const Config& config) {
  if (!config.node_host.empty()) return config.node_host;
  if (!config.interface.empty()) return InterfaceAddress(config.interface);
  if (config.role == Role::kScheduler) return config.root_uri;
  return RouteSourceAddress(config.root_uri, config.root_port);
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
  body.min_workers = config.min_workers;
  body.max_workers = config.max_workers;
  body.address = listening.value();
  Message m;
  m.type = MessageType::kRegister;
  m.text = body.Encode();
  transport->Send(*scheduler, m.Encode(), nullptr, 0, nullptr);
  return Status::OK();
}

}  // namespace bps

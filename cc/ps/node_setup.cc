#include "cc/ps/node_setup.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "cc/common/clock.h"
#include "cc/transport/address.h"

namespace bps {

StatusOr<std::string> AdvertisedHost(const Config& config) {
  if (!config.node_host.empty()) return config.node_host;
  if (!config.interface.empty()) return InterfaceAddress(config.interface);
  if (config.role == Role::kScheduler) return config.root_uri;
  return RouteSourceAddress(config.root_uri, config.root_port);
}

namespace {

Status Register(const Config& config, Transport* transport, PeerId scheduler, const std::string& listening,
                const Rejoin& rejoin) {
  RegisterBody body;
  body.role = static_cast<int32_t>(config.role);
  body.worker_id = config.worker_id;
  body.local_rank = config.local_rank;
  body.local_size = config.local_size;
  body.num_worker = config.num_worker;
  body.num_server = config.num_server;
  body.min_workers = config.min_workers;
  body.max_workers = config.max_workers;
  body.address = listening;
  body.last_generation = rejoin.generation;
  body.last_rank = rejoin.rank;
  body.generation_workers = rejoin.workers;
  body.generation_servers = rejoin.servers;
  Message m;
  m.type = MessageType::kRegister;
  m.text = body.Encode();
  transport->Send(scheduler, m.Encode(), nullptr, 0, nullptr);
  return Status::OK();
}

std::string SchedulerAddress(const Config& config) {
  return config.root_uri + ":" + std::to_string(config.root_port);
}

}  // namespace

Status JoinJob(const Config& config, Transport* transport, std::atomic<PeerId>* scheduler, std::string* listening) {
  auto host = AdvertisedHost(config);
  if (!host.ok()) return host.status();
  auto bound = transport->Listen(host.value(), 0);
  if (!bound.ok()) {
    return Status(bound.status().code(), bound.status().message() +
                                             " (set DMLC_NODE_HOST or DMLC_INTERFACE to an address of this machine)");
  }
  if (listening != nullptr) *listening = bound.value();
  const std::string root = SchedulerAddress(config);
  auto peer = transport->Connect(root, config.timeout_s, Link::kControl);
  if (!peer.ok()) {
    return Status(peer.status().code(), "cannot reach the scheduler at " + root + " (DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT): " +
                                            peer.status().message());
  }
  *scheduler = peer.value();
  return Register(config, transport, *scheduler, bound.value(), Rejoin{});
}

Status RejoinJob(const Config& config, Transport* transport, const std::string& listening, const Rejoin& rejoin,
                 double deadline, const std::function<bool()>& stop, std::atomic<PeerId>* scheduler) {
  const std::string root = SchedulerAddress(config);
  Status last = Unavailable("no attempt");
  while (!stop()) {
    const double left = deadline - NowSeconds();
    if (left <= 0) break;
    // Short attempts: a scheduler that is starting again refuses connections until it listens.
    auto peer = transport->Connect(root, std::min(left, 2.0), Link::kControl);
    if (peer.ok()) {
      *scheduler = peer.value();
      return Register(config, transport, *scheduler, listening, rejoin);
    }
    last = peer.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::ostringstream text;
  text << "lost the scheduler, and no scheduler came back at " << root << " within BYTEPS_ELASTIC_TIMEOUT="
       << config.elastic_timeout_s << " s (the last attempt: " << last.message() << "); an elastic job goes on "
       << "after losing its scheduler only if one is started again at the same address (bpslaunch "
       << "--max-restarts does)";
  return Unavailable(text.str());
}

}  // namespace bps

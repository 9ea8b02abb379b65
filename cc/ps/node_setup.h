// What every node does to join a job: pick the address it advertises, register with the scheduler.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "cc/common/config.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

// DMLC_NODE_HOST, else DMLC_INTERFACE's address, else the scheduler's own URI (scheduler), else the
// local address on the route to the scheduler.
StatusOr<std::string> AdvertisedHost(const Config& config);

// Listens on the advertised host, connects to the scheduler and sends REGISTER. The role's handler
// receives the ADDRESS_BOOK reply, which may come at once: `scheduler` is set before REGISTER leaves.
// `listening` (optional) gets the address peers reach this node at.
Status JoinJob(const Config& config, Transport* transport, std::atomic<PeerId>* scheduler,
               std::string* listening = nullptr);

// Where a member of an elastic job was when it lost its scheduler (RegisterBody's rejoin fields).
struct Rejoin {
  int generation = 0;
  int rank = -1;
  int workers = 0;
  int servers = 0;
};

// Elastic: the scheduler was lost. Connects to a scheduler at DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT again (one
// started in its place), trying until `deadline` (NowSeconds()), and registers the node listening at
// `listening` with `rejoin`. `stop` is asked between tries: true ends the wait (the process is leaving).
Status RejoinJob(const Config& config, Transport* transport, const std::string& listening, const Rejoin& rejoin,
                 double deadline, const std::function<bool()>& stop, std::atomic<PeerId>* scheduler);

}  // namespace bps

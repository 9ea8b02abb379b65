// What every node does to join a job: pick the address it advertises, register with the scheduler.
#pragma once

#include <string>

#include "cc/common/config.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

// DMLC_NODE_HOST, else DMLC_INTERFACE's address, else the scheduler's own URI (scheduler), else the
// local address on the route to the scheduler.
StatusOr<std::string> AdvertisedHost(const Config& config);

// Listens on the advertised host, connects to the scheduler and sends REGISTER. The role's handler
// receives the ADDRESS_BOOK reply.
Status JoinJob(const Config& config, Transport* transport, PeerId* scheduler);

}  // namespace bps

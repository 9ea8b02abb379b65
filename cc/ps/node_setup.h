// What every node does to join a job: pick the address it advertises, configure UCX, register.
#pragma once

#include <string>

#include "cc/common/config.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"
#include "cc/transport/ucx_transport.h"

namespace bps {

// DMLC_NODE_HOST, else DMLC_INTERFACE's address, else the scheduler's own URI (scheduler), else the
// local address on the route to the scheduler.
StatusOr<std::string> AdvertisedHost(const Config& config);

// BYTEPS_UCX_TLS wins; DMLC_ENABLE_RDMA=1 leaves UCX free to pick RDMA; otherwise TCP and shared memory
// (unless the user set UCX_TLS themselves). Without RDMA, payloads between hosts go eager.
UcxOptions UcxOptionsFor(const Config& config, const Environment& env);

// Whether a UCX_TLS list names an RDMA transport (ib; rc, ud, dc and their variants such as rc_x).
bool ListsRdmaTransport(const std::string& tls);

// Listens on the advertised host, connects to the scheduler and sends REGISTER. The role's handler
// receives the ADDRESS_BOOK reply.
Status JoinJob(const Config& config, Transport* transport, PeerId* scheduler);

}  // namespace bps

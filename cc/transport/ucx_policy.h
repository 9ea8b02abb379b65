// How bps_tf configures UCX for a job: which transports, eager or rendezvous payloads, keepalive probes,
// TCP socket buffers. Read once per process from the job's Config and the environment.
#pragma once

#include "cc/common/config.h"
#include "cc/transport/ucx_transport.h"

namespace bps {

// BYTEPS_UCX_TLS wins; DMLC_ENABLE_RDMA=1 leaves UCX free to pick RDMA; otherwise TCP and shared memory
// (unless the user set UCX_TLS themselves). Without RDMA, payloads between hosts go eager.
UcxOptions UcxOptionsFor(const Config& config, const Environment& env);

}  // namespace bps

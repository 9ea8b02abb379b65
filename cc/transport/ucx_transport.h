// Transport over UCX's ucp active messages: TCP and shared memory everywhere, RDMA (rc/ud/dc) where the
// hardware has it. One thread owns the ucp worker; other threads hand it work through a queue.
#pragma once

#include <memory>
#include <string>

#include "cc/transport/transport.h"

namespace bps {

struct UcxOptions {
  // UCX transport list (UCX_TLS syntax). Empty keeps UCX's own choice (UCX_TLS from the environment,
  // else every transport UCX finds).
  std::string tls;
};

StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(const UcxOptions& options);

}  // namespace bps

// Test support: the configuration of one node of a job whose nodes are threads of one process, connected
// by the in-memory transport (the scheduler is "scheduler", every other node's host is "node").
#pragma once

#include <cstddef>

#include "cc/common/config.h"

namespace bps {
namespace testing {

inline Config NodeConfig(Role role, int num_workers, int num_servers, int worker_id, double timeout_s,
                         size_t credit_bytes = 4 * 4096, int local_size = 1, int local_rank = 0) {
  Config c;
  c.local_size = local_size;
  c.local_rank = local_rank;
  c.role = role;
  c.root_uri = "scheduler";
  c.root_port = 1;
  c.node_host = role == Role::kScheduler ? "scheduler" : "node";
  c.num_worker = num_workers;
  c.num_server = num_servers;
  c.worker_id = worker_id;
  c.partition_bytes = 4096;
  c.scheduling_credit = credit_bytes;
  c.timeout_s = timeout_s;
  return c;
}

}  // namespace testing
}  // namespace bps

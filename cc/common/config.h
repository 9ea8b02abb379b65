// Job configuration, parsed once from DMLC_* / BYTEPS_* environment variables (names as in BytePS/ps-lite).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "cc/common/status.h"

namespace bps {

enum class Role { kScheduler, kServer, kWorker };
const char* RoleName(Role role);

using Environment = std::map<std::string, std::string>;

// The process environment as a map (tests pass their own map instead).
Environment ProcessEnvironment();

struct Config {
  Role role = Role::kWorker;
  std::string root_uri;  // scheduler address
  int root_port = 0;
  int num_worker = 1;    // worker machines
  int num_server = 1;
  int worker_id = 0;     // this worker machine's id (workers only)
  int local_size = 1;    // worker processes on this machine
  int local_rank = 0;
  std::string interface;  // DMLC_INTERFACE: NIC whose address this node advertises
  std::string node_host;  // DMLC_NODE_HOST: address this node advertises (wins over interface)
  bool enable_rdma = false;
  std::string ucx_tls;    // BYTEPS_UCX_TLS: explicit UCX transports, wins over enable_rdma
  size_t partition_bytes = 4096000;
  // Between hosts over TCP, each partition crosses the network in slices of at most this many bytes, each
  // summed and returned on its own, so the first slices come back while the last are still arriving (a 4 MB
  // partition held back every worker's sum until all of it had crossed every link). 0: whole partitions.
  // Not used on one host or over RDMA, where whole partitions are faster.
  size_t slice_bytes = 256000;
  // Bytes being pushed at once per worker; 0 means unlimited. Unset (auto): unlimited when every server
  // is on this host (memory-bound); otherwise (network-bound) a few slices (kSlicesInFlight), or one
  // partition where partitions are not sliced, so that pushes cross the link in priority order and pulls of
  // early ones overlap pushes of later ones.
  std::optional<size_t> scheduling_credit;
  int server_engine_threads = 2;
  double timeout_s = 300;        // every wait on a peer gives up after this
  bool force_distributed = false;  // BYTEPS_FORCE_DISTRIBUTED: push/pull even with one worker machine
  // BYTEPS_SHARED_MEMORY: workers and servers on one host exchange tensors through the server's shared
  // memory (cc/common/shared_arena.h) instead of the transport.
  bool shared_memory = true;

  static constexpr int kSlicesInFlight = 4;

  int worker_processes() const { return num_worker * local_size; }
  int rank() const { return worker_id * local_size + local_rank; }

  // Errors name the variable and say how to fix it.
  static StatusOr<Config> FromEnvironment(const Environment& env);
};

}  // namespace bps

// Orders operations among the worker processes of one machine (one process per GPU). NCCL needs every
// member of a communicator to issue its collectives in the same order, but each process's framework makes
// tensors ready in an order of its own. So every process calls Order(token) when its part is ready; local
// rank 0 announces a token once every local process has ordered it, and each process runs the token's
// `run` in the order of the announcements, which is the same in every process. A process's k-th Order of
// a token is matched with the others' k-th.
//
// The processes talk over a Unix socket in the abstract namespace (nothing is left on disk), named after
// the job and the machine. Every wait has a limit: a token some local process never orders fails in every
// process that ordered it, naming the missing local ranks; a lost process fails everything at once.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cc/common/status.h"

namespace bps {
namespace cuda {

class LocalCoordinator {
 public:
  // Runs on the coordinator's own thread, one at a time, in announcement order. Gets local rank 0's
  // payload for the token, or the error that ended it.
  using Run = std::function<void(const StatusOr<std::string>& root_payload)>;

  // Local rank 0 listens on `name`, the others connect to it (waiting up to `timeout_s` for it to listen).
  static StatusOr<std::unique_ptr<LocalCoordinator>> Connect(const std::string& name, int local_rank,
                                                             int local_size, double timeout_s);
  virtual ~LocalCoordinator() = default;

  // `payload` matters on local rank 0 only: every process's `run` receives rank 0's (an NCCL unique id,
  // for example). `run` is called exactly once.
  virtual void Order(const std::string& token, const std::string& payload, Run run) = 0;
};

// The socket name for the processes of worker machine `worker_id` of the job whose scheduler is at
// `root_uri:root_port` (distinct jobs and machines sharing a host do not meet).
std::string LocalCoordinatorName(const std::string& root_uri, int root_port, int worker_id);

}  // namespace cuda
}  // namespace bps

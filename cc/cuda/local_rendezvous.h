// Where the replicas of one tensor meet: with one process driving several GPUs, each replica's op arrives
// on its own device, in any order; once all of them have, the GPU push_pull runs for them together.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cc/cuda/gpu_push_pull.h"

namespace bps {
namespace cuda {

class LocalRendezvous {
 public:
  using Start = std::function<void(std::vector<GpuTensor> members, std::vector<std::function<void(const Status&)>>)>;

  // Records `member` (its done callback with it); when `expected` members of `name` have arrived, calls
  // start() with them sorted by device. A device arriving twice for one name is an error for that caller.
  void Arrive(const std::string& name, int expected, GpuTensor member, std::function<void(const Status&)> done,
              const Start& start);

  // Fails the members of every tensor whose first replica arrived more than `timeout_s` ago and whose
  // others never came, so a missing replica is an error, not a hang.
  void FailOlderThan(double timeout_s);

 private:
  struct Waiting {
    std::vector<GpuTensor> members;
    std::vector<std::function<void(const Status&)>> dones;
    int expected = 0;
    double first_arrival = 0;
  };
  std::mutex mu_;
  std::map<std::string, Waiting> waiting_;
};

}  // namespace cuda
}  // namespace bps

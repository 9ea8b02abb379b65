#include "cc/cuda/local_rendezvous.h"

#include <algorithm>
#include <numeric>

namespace bps {
namespace cuda {

void LocalRendezvous::Arrive(const std::string& name, int expected, GpuTensor member,
                             std::function<void(const Status&)> done, const Start& start) {
  Waiting ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Waiting& waiting = waiting_[name];
    for (const GpuTensor& other : waiting.members) {
      if (other.device == member.device) {
        done(InvalidArgument("push_pull of '" + name + "': two replicas on GPU " + std::to_string(member.device) +
                             "; each local replica must be on its own GPU"));
        return;
      }
    }
    waiting.members.push_back(member);
    waiting.dones.push_back(std::move(done));
    if (static_cast<int>(waiting.members.size()) < expected) return;
    ready = std::move(waiting);
    waiting_.erase(name);
  }
  std::vector<size_t> order(ready.members.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return ready.members[a].device < ready.members[b].device; });
  std::vector<GpuTensor> members;
  std::vector<std::function<void(const Status&)>> dones;
  for (size_t i : order) {
    members.push_back(ready.members[i]);
    dones.push_back(std::move(ready.dones[i]));
  }
  start(std::move(members), std::move(dones));
}

}  // namespace cuda
}  // namespace bps

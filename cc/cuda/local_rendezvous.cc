#include "cc/cuda/local_rendezvous.h"

#include <algorithm>
#include <numeric>

#include "cc/common/clock.h"

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
    if (waiting.members.empty()) {
      waiting.first_arrival = NowSeconds();
      waiting.expected = expected;
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

void LocalRendezvous::FailOlderThan(double timeout_s) {
  std::vector<std::pair<std::string, Waiting>> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = NowSeconds();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (now - it->second.first_arrival < timeout_s) {
        ++it;
        continue;
      }
      expired.emplace_back(it->first, std::move(it->second));
      it = waiting_.erase(it);
    }
  }
  for (auto& entry : expired) {
    Status error = DeadlineExceeded(
        "push_pull of '" + entry.first + "': only " + std::to_string(entry.second.members.size()) + " of " +
        std::to_string(entry.second.expected) + " local GPU replicas arrived within BYTEPS_TIMEOUT");
    for (auto& done : entry.second.dones) done(error);
  }
}

}  // namespace cuda
}  // namespace bps

#include "cc/cuda/process_gpu.h"

#include <map>
#include <memory>
#include <mutex>

#include "cc/common/work_thread.h"
#include "cc/cuda/local_rendezvous.h"
#include "cc/runtime/process_engine.h"

namespace bps {
namespace cuda {
namespace {

struct GpuSet {
  std::unique_ptr<LocalNccl> nccl;
  std::unique_ptr<GpuPushPull> push_pull;
};

std::mutex g_mu;
std::map<std::vector<int>, GpuSet> g_sets;  // process-wide: NCCL communicators live as long as the process
LocalRendezvous g_rendezvous;

// Started with the first GPU push_pull: fails rendezvous that waited longer than BYTEPS_TIMEOUT.
void StartRendezvousWatchdog(double timeout_s) {
  static WorkThread* watchdog = new WorkThread([timeout_s] { g_rendezvous.FailOlderThan(timeout_s); });
  (void)watchdog;
}

StatusOr<GpuPushPull*> ForDevices(const std::vector<int>& devices) {
  Engine* engine = ProcessEngine();
  if (engine == nullptr) return FailedPrecondition("GPU push_pull before bps_tf.init(): call bps_tf.init() first");
  std::lock_guard<std::mutex> lock(g_mu);
  GpuSet& set = g_sets[devices];
  if (set.push_pull) return set.push_pull.get();
  auto nccl = LocalNccl::ForDevices(devices);
  if (!nccl.ok()) return nccl.status();
  GpuPushPullOptions options;
  options.chunk_bytes = engine->config().partition_bytes;
  options.distributed = engine->size() > 1 || engine->config().force_distributed;
  auto push_pull = std::make_unique<GpuPushPull>(engine, nccl.value().get(), options);
  BPS_RETURN_IF_ERROR(push_pull->Init());
  set.nccl = std::move(nccl.value());
  set.push_pull = std::move(push_pull);
  return set.push_pull.get();
}

}  // namespace

void ProcessGpuPushPull(const std::string& name, DataType dtype, uint64_t count, int priority, int local_devices,
                        GpuTensor member, std::function<void(const Status&)> done) {
  if (Engine* engine = ProcessEngine()) StartRendezvousWatchdog(engine->config().timeout_s);
  g_rendezvous.Arrive(
      name, local_devices, member, std::move(done),
      [name, dtype, count, priority](std::vector<GpuTensor> members,
                                     std::vector<std::function<void(const Status&)>> dones) {
        std::vector<int> devices;
        for (const GpuTensor& m : members) devices.push_back(m.device);
        auto finish_all = [dones](const Status& s) {
          for (const auto& d : dones) d(s);
        };
        auto push_pull = ForDevices(devices);
        if (!push_pull.ok()) return finish_all(push_pull.status());
        push_pull.value()->Run(name, dtype, count, priority, std::move(members), finish_all);
      });
}

}  // namespace cuda
}  // namespace bps

#include "cc/cuda/process_gpu.h"

#include <future>
#include <map>
#include <memory>
#include <mutex>

#include "cc/common/work_thread.h"
#include "cc/cuda/local_rendezvous.h"
#include "cc/runtime/process_engine.h"

namespace bps {
namespace cuda {
namespace {

// A group and the engine it enqueues into, kept alive together. Groups (and their NCCL communicators) live
// until the engine is shut down; a later init builds new ones for the new job.
struct CachedGroup {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<GpuGroup> group;
};

std::mutex g_mu;
std::map<std::vector<int>, CachedGroup> g_groups;
LocalRendezvous g_rendezvous;

void ForgetGroups() {
  std::map<std::vector<int>, CachedGroup> groups;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    groups.swap(g_groups);
  }
  // Destroyed outside the lock: a group waits for its streams' work to finish.
}

// Started with the first GPU push_pull: fails rendezvous that waited longer than BYTEPS_TIMEOUT.
void StartRendezvousWatchdog(double timeout_s) {
  static WorkThread* watchdog = new WorkThread([timeout_s] { g_rendezvous.FailOlderThan(timeout_s); });
  (void)watchdog;
}

// One process per GPU: local rank 0 creates the communicator's id, the coordinator hands it to the others,
// and every process joins with its local rank as NCCL rank.
StatusOr<std::unique_ptr<LocalNccl>> JoinMachineNccl(LocalCoordinator* coordinator, const Config& config, int device) {
  std::string id;
  if (config.local_rank == 0) {
    auto fresh = LocalNccl::NewUniqueId();
    if (!fresh.ok()) return fresh.status();
    id = fresh.value();
  }
  auto joined = std::make_shared<std::promise<StatusOr<std::unique_ptr<LocalNccl>>>>();
  auto result = joined->get_future();
  coordinator->Order("nccl communicator", id, [joined, config, device](const StatusOr<std::string>& root_id) {
    if (!root_id.ok()) return joined->set_value(root_id.status());
    joined->set_value(LocalNccl::ForProcess(device, config.local_rank, config.local_size, root_id.value()));
  });
  // The coordinator gives up on local ranks that never come after BYTEPS_TIMEOUT; NCCL's own join is bounded too.
  if (result.wait_for(std::chrono::duration<double>(2 * config.timeout_s + 60)) != std::future_status::ready) {
    return DeadlineExceeded("the NCCL communicator of this machine's processes was not set up in time");
  }
  return result.get();
}

StatusOr<GpuPushPull*> ProcessGroup(const std::vector<int>& devices) {
  static std::once_flag hook_added;
  std::call_once(hook_added, [] { AddProcessShutdownHook(ForgetGroups); });
  std::shared_ptr<Engine> engine = ProcessEngine();
  if (engine == nullptr) return FailedPrecondition("GPU push_pull before bps_tf.init(): call bps_tf.init() first");
  std::lock_guard<std::mutex> lock(g_mu);
  CachedGroup& cached = g_groups[devices];
  if (cached.group && cached.engine == engine) return cached.group->push_pull.get();
  auto created = CreateGpuGroup(engine.get(), devices, DefaultGpuOptions(*engine));
  if (!created.ok()) {
    g_groups.erase(devices);
    return created.status();
  }
  cached.engine = engine;
  cached.group = std::move(created.value());
  return cached.group->push_pull.get();
}

}  // namespace

GpuPushPullOptions DefaultGpuOptions(const Engine& engine) {
  GpuPushPullOptions options;
  options.chunk_bytes = engine.config().partition_bytes;
  options.distributed = engine.config().num_worker > 1 || engine.config().force_distributed;
  options.direct_copies = engine.config().gpu_direct_copies;
  return options;
}

StatusOr<std::unique_ptr<GpuGroup>> CreateGpuGroup(Engine* engine, const std::vector<int>& devices,
                                                   GpuPushPullOptions options) {
  const Config& config = engine->config();
  auto group = std::make_unique<GpuGroup>();
  if (config.local_size > 1) {
    if (devices.size() != 1) {
      return InvalidArgument("with BYTEPS_LOCAL_SIZE=" + std::to_string(config.local_size) +
                             " each worker process drives one GPU, but this one has " +
                             std::to_string(devices.size()) +
                             " replicas of a tensor; use one process per GPU, or one process (BYTEPS_LOCAL_SIZE=1) "
                             "for all of them");
    }
    auto coordinator = LocalCoordinator::Connect(
        LocalCoordinatorName(config.root_uri, config.root_port, config.worker_id), config.local_rank,
        config.local_size, config.timeout_s);
    if (!coordinator.ok()) return coordinator.status();
    group->coordinator = std::move(coordinator.value());
    auto nccl = JoinMachineNccl(group->coordinator.get(), config, devices[0]);
    if (!nccl.ok()) return nccl.status();
    group->nccl = std::move(nccl.value());
  } else {
    auto nccl = LocalNccl::ForDevices(devices);
    if (!nccl.ok()) return nccl.status();
    group->nccl = std::move(nccl.value());
  }
  group->push_pull = std::make_unique<GpuPushPull>(engine, group->nccl.get(), group->coordinator.get(), options);
  BPS_RETURN_IF_ERROR(group->push_pull->Init());
  return group;
}

void ProcessGpuPushPull(const std::string& name, DataType dtype, uint64_t count, int priority, int local_devices,
                        GpuTensor member, std::function<void(const Status&)> done) {
  if (std::shared_ptr<Engine> engine = ProcessEngine()) StartRendezvousWatchdog(engine->config().timeout_s);
  g_rendezvous.Arrive(
      name, local_devices, member, std::move(done),
      [name, dtype, count, priority](std::vector<GpuTensor> members,
                                     std::vector<std::function<void(const Status&)>> dones) {
        std::vector<int> devices;
        for (const GpuTensor& m : members) devices.push_back(m.device);
        auto finish_all = [dones](const Status& s) {
          for (const auto& d : dones) d(s);
        };
        auto push_pull = ProcessGroup(devices);
        if (!push_pull.ok()) return finish_all(push_pull.status());
        push_pull.value()->Run(name, dtype, count, priority, std::move(members), finish_all);
      });
}

}  // namespace cuda
}  // namespace bps

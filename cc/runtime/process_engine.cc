#include "cc/runtime/process_engine.h"

#include <memory>
#include <mutex>

#include "cc/ps/node_setup.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/transport/ucx_transport.h"

namespace bps {
namespace {

std::mutex g_mu;
std::unique_ptr<Engine> g_engine;

StatusOr<std::unique_ptr<Transport>> MakeTransport(const Config& config) {
  return CreateUcxTransport(UcxOptionsFor(config, ProcessEnvironment()));
}

}  // namespace

Status ValidateEnvironment() { return Config::FromEnvironment(ProcessEnvironment()).status(); }

Status InitProcessEngine() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_engine) return FailedPrecondition("bps_tf is already initialised; call shutdown() before init() again");
  auto config = Config::FromEnvironment(ProcessEnvironment());
  if (!config.ok()) return config.status();
  if (config.value().role != Role::kWorker) {
    return FailedPrecondition(std::string("init() runs in worker processes, but DMLC_ROLE=") +
                              RoleName(config.value().role));
  }
  auto transport = MakeTransport(config.value());
  if (!transport.ok()) return transport.status();
  auto engine = Engine::Start(config.value(), std::move(transport.value()));
  if (!engine.ok()) return engine.status();
  g_engine = std::move(engine.value());
  return Status::OK();
}

Engine* ProcessEngine() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_engine.get();
}

Status ShutdownProcessEngine() {
  std::unique_ptr<Engine> engine;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    engine = std::move(g_engine);
  }
  return engine ? engine->Shutdown() : Status::OK();
}

Status RunServiceRole() {
  auto config = Config::FromEnvironment(ProcessEnvironment());
  if (!config.ok()) return config.status();
  auto transport = MakeTransport(config.value());
  if (!transport.ok()) return transport.status();
  Status result;
  if (config.value().role == Role::kScheduler) {
    Scheduler scheduler(config.value(), transport.value().get());
    result = scheduler.Run();
    transport.value()->Shutdown(5);
  } else if (config.value().role == Role::kServer) {
    Server server(config.value(), transport.value().get());
    result = server.Run();
    transport.value()->Shutdown(5);
  } else {
    result = FailedPrecondition("DMLC_ROLE=worker runs the training command, not a service role");
  }
  return result;
}

}  // namespace bps

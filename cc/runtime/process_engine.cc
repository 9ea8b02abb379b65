#include "cc/runtime/process_engine.h"

#include <memory>
#include <mutex>
#include <vector>

#include "cc/common/communication_counters.h"
#include "cc/common/timeline.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/transport/tcp_transport.h"
#include "cc/transport/ucx_policy.h"

namespace bps {
namespace {

// This process's place in the job, kept across generations.
struct Membership {
  Config config;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<WorkerClient> client;

  ~Membership() {
    if (transport) transport->Shutdown(1);
  }
};

std::mutex g_mu;
std::unique_ptr<Membership> g_membership;
std::shared_ptr<Engine> g_engine;
std::vector<std::function<void()>> g_shutdown_hooks;  // guarded by g_mu
bool g_local_collectives = false;  // guarded by g_mu; see Engine::set_local_collectives

StatusOr<std::unique_ptr<Transport>> MakeTransport(const Config& config) {
  auto secret = JobSecret::From(config.job_secret);
  if (!secret.ok()) return secret.status();
  if (config.transport == TransportKind::kUcx) {
    UcxOptions options = UcxOptionsFor(config, ProcessEnvironment());
    options.secret = secret.value();
    return CreateUcxTransport(options);
  }
  TcpOptions options;
  options.secret = secret.value();
  options.liveness_timeout_s = config.timeout_s;
  options.send_buffer_bytes = config.tcp_send_buffer_bytes;
  options.io_threads = config.tcp_io_threads;
  return CreateTcpTransport(options);
}

// Whether `config` describes the same place in the same job as the membership's.
bool SamePlace(const Config& a, const Config& b) {
  return a.root_uri == b.root_uri && a.root_port == b.root_port && a.num_worker == b.num_worker &&
         a.num_server == b.num_server && a.worker_id == b.worker_id && a.local_rank == b.local_rank &&
         a.local_size == b.local_size && a.job_secret == b.job_secret;
}

// Joins the job, or says why this process cannot start a generation in the one it joined. With g_mu held.
Status EnsureMembership(const Config& config) {
  if (g_membership) {
    Status failed = g_membership->client->failure();
    if (!failed.ok() && g_membership->client->rejoinable()) {
      // Removed from an elastic job (this process was stopped meanwhile): it joins again, as a new worker would.
      BPS_LOG(Warning) << "this worker left the job (" << failed.message() << "); joining it again";
      g_membership.reset();
    } else if (!failed.ok()) {
      return FailedPrecondition("this process's job failed (" + failed.message() +
                                "); a new job needs new processes");
    } else if (!SamePlace(g_membership->config, config)) {
      return FailedPrecondition("init() after shutdown() joins the same job again: the DMLC_* variables and the "
                                "job secret must not change in between");
    } else {
      // An elastic job forms each generation anew; a fixed one goes on with the same workers.
      return config.elastic() ? g_membership->client->NextGeneration() : Status::OK();
    }
  }
  auto transport = MakeTransport(config);
  if (!transport.ok()) return transport.status();
  auto membership = std::make_unique<Membership>();
  membership->config = config;
  membership->transport = std::move(transport.value());
  membership->client = std::make_shared<WorkerClient>(config, membership->transport.get());
  BPS_RETURN_IF_ERROR(membership->client->Start());  // on failure the membership closes its transport at once
  g_membership = std::move(membership);
  return Status::OK();
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
  BPS_RETURN_IF_ERROR(EnsureMembership(config.value()));
  const Config& c = config.value();
  if (c.trace_on && !Timeline::OfProcess().on()) {
    BPS_RETURN_IF_ERROR(
        Timeline::OfProcess().Start(c.trace_dir + "/" + std::to_string(g_membership->client->rank()) + "/comm.json",
                                    g_membership->client->rank()));
  }
  // A worker that joined a running elastic job works alone until bps_tf.elastic synchronised its state.
  if (g_membership->client->TakeJoinedRunning()) g_local_collectives = true;
  // A new engine counts rounds from the start: the last one's replies say nothing of them.
  CommunicationCounters::OfProcess().ForgetRoundsBehind();
  g_engine = std::shared_ptr<Engine>(Engine::Start(c, g_membership->client));
  g_engine->set_local_collectives(g_local_collectives);
  return Status::OK();
}

std::shared_ptr<Engine> ProcessEngine() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_engine;
}

void AddProcessShutdownHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_shutdown_hooks.push_back(std::move(hook));
}

namespace {

// Ends the generation (as a join, or not) and runs the shutdown hooks. Returns the rank of the worker that
// finished last (-1 where unknown: not initialised, or a failure that shutdown() reports).
StatusOr<int> EndGeneration(bool joined) {
  std::shared_ptr<Engine> engine;
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // A joined worker never pushes again: with backup workers the servers' window would wait for it.
    if (joined && g_engine && g_engine->config().backup_workers > 0) {
      return FailedPrecondition("join() is not offered with backup workers (BYTEPS_BACKUP_WORKERS): give every "
                                "worker the same number of steps, or unset BYTEPS_BACKUP_WORKERS");
    }
    engine = std::move(g_engine);
    hooks = g_shutdown_hooks;
  }
  if (!engine) {
    if (joined) return FailedPrecondition("join() before init(): call bps_tf.init() first");
    return -1;
  }
  StatusOr<int> ended = -1;
  if (joined) {
    ended = engine->Join();
  } else if (Status s = engine->Shutdown(); !s.ok()) {
    ended = s;
  }
  for (const auto& hook : hooks) hook();
  return ended;
}

}  // namespace

Status ShutdownProcessEngine() {
  StatusOr<int> ended = EndGeneration(false);
  return ended.ok() ? Status::OK() : ended.status();
}

StatusOr<int> JoinProcessEngine() {
  StatusOr<int> last = EndGeneration(true);
  if (!last.ok()) return last;
  BPS_RETURN_IF_ERROR(InitProcessEngine());
  return last;
}

Status LeaveJob() {
  Status ended = ShutdownProcessEngine();
  std::unique_ptr<Membership> membership;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    membership = std::move(g_membership);
  }
  Timeline::OfProcess().Stop();
  return ended;  // the membership's connections close here
}

void SetLocalCollectives(bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_local_collectives = on;
  if (g_engine) g_engine->set_local_collectives(on);
}

ElasticState ProcessElasticState() {
  std::shared_ptr<WorkerClient> client;
  ElasticState state;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_membership) return state;
    client = g_membership->client;
    state.elastic = g_membership->config.elastic();
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    state.local_collectives = g_local_collectives;
  }
  state.generation = client->generation();
  state.workers_waiting = client->workers_waiting();
  state.servers = client->num_servers();
  state.membership_changed =
      state.elastic && (!client->generation_failure().ok() || (!client->failure().ok() && client->rejoinable()));
  return state;
}

void AbortJob(const std::string& why) {
  std::shared_ptr<WorkerClient> client;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_membership) client = g_membership->client;
  }
  if (client) client->RequestAbort(why);
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

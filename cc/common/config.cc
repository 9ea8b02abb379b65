#include "cc/common/config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace bps {
namespace {

class EnvReader {
 public:
  explicit EnvReader(const Environment& env) : env_(env) {}

  bool Has(const std::string& name) const {
    auto it = env_.find(name);
    return it != env_.end() && !it->second.empty();
  }

  std::string String(const std::string& name, const std::string& fallback = "") const {
    return Has(name) ? env_.at(name) : fallback;
  }

  // Reads an integer in [min, max]; `how` says what the value means, for the error message.
  Status Int(const std::string& name, long min, long max, long* out, const char* how) const {
    if (!Has(name)) return Status::OK();
    const std::string& text = env_.at(name);
    char* end = nullptr;
    errno = 0;
    long value = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0' || value < min || value > max) {
      return InvalidArgument(name + "='" + text + "' is invalid: it must be " + how + ".");
    }
    *out = value;
    return Status::OK();
  }

  Status Seconds(const std::string& name, double* out) const {
    if (!Has(name)) return Status::OK();
    const std::string& text = env_.at(name);
    char* end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || !(value > 0) || value > kMaxTimeoutS) {
      return InvalidArgument(name + "='" + text + "' is invalid: it must be a number of seconds above 0 and at most " +
                             std::to_string(static_cast<long>(kMaxTimeoutS)) + " (a week).");
    }
    *out = value;
    return Status::OK();
  }

  Status Require(const std::string& name, const char* how) const {
    if (Has(name)) return Status::OK();
    return InvalidArgument(name + " is not set: " + how);
  }

 private:
  const Environment& env_;
};

// An IPv4 address for `host` (a literal, or a name resolved now), so that a bad name fails at once.
Status ResolveIPv4(const std::string& variable, std::string* host) {
  in_addr literal;
  if (inet_pton(AF_INET, host->c_str(), &literal) == 1) return Status::OK();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host->c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return InvalidArgument(variable + "='" + *host + "' is not an IPv4 address and does not resolve to one (" +
                           gai_strerror(rc) + "): set it to an address or host name of that machine.");
  }
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof(text));
  freeaddrinfo(found);
  *host = text;
  return Status::OK();
}

// BYTEPS_JOB_SECRET, or the first line of BYTEPS_JOB_SECRET_FILE.
Status ReadJobSecret(const EnvReader& env, std::string* secret) {
  const char* how = "every process of a job must prove it holds the job's secret: set BYTEPS_JOB_SECRET (the same "
                    "random string on every process, e.g. from `openssl rand -hex 32`) or BYTEPS_JOB_SECRET_FILE "
                    "(a file holding it); `bpslaunch --local` makes one itself.";
  if (env.Has("BYTEPS_JOB_SECRET") && env.Has("BYTEPS_JOB_SECRET_FILE")) {
    return InvalidArgument("both BYTEPS_JOB_SECRET and BYTEPS_JOB_SECRET_FILE are set: set one of them.");
  }
  if (env.Has("BYTEPS_JOB_SECRET")) {
    *secret = env.String("BYTEPS_JOB_SECRET");
  } else if (env.Has("BYTEPS_JOB_SECRET_FILE")) {
    const std::string path = env.String("BYTEPS_JOB_SECRET_FILE");
    std::ifstream file(path);
    if (!file || !std::getline(file, *secret)) {
      return InvalidArgument("BYTEPS_JOB_SECRET_FILE='" + path + "' cannot be read: " + std::strerror(errno) + ".");
    }
    while (!secret->empty() && (secret->back() == '\r' || secret->back() == ' ')) secret->pop_back();
  } else {
    return InvalidArgument(std::string("no job secret: ") + how);
  }
  if (secret->size() < kMinJobSecretBytes) {
    return InvalidArgument("the job secret has " + std::to_string(secret->size()) + " bytes; it needs at least " +
                           std::to_string(kMinJobSecretBytes) + ": " + how);
  }
  return Status::OK();
}

Status ParseRole(const EnvReader& env, Role* role) {
  BPS_RETURN_IF_ERROR(env.Require("DMLC_ROLE", "set it to scheduler, server or worker (bpslaunch does this)."));
  std::string text = env.String("DMLC_ROLE");
  if (text == "scheduler") *role = Role::kScheduler;
  else if (text == "server") *role = Role::kServer;
  else if (text == "worker") *role = Role::kWorker;
  else return InvalidArgument("DMLC_ROLE='" + text + "' is invalid: it must be scheduler, server or worker.");
  return Status::OK();
}

// BYTEPS_MIN_WORKERS, BYTEPS_MAX_WORKERS (either makes the job elastic; the other defaults to 1 and
// DMLC_NUM_WORKER) and BYTEPS_ELASTIC_TIMEOUT, checked against DMLC_NUM_WORKER (already read).
Status ReadElasticLimits(const EnvReader& env, Config* c) {
  if (!env.Has("BYTEPS_MIN_WORKERS") && !env.Has("BYTEPS_MAX_WORKERS")) {
    if (env.Has("BYTEPS_ELASTIC_TIMEOUT")) {
      return InvalidArgument("BYTEPS_ELASTIC_TIMEOUT is set, but the job is not elastic: set BYTEPS_MIN_WORKERS "
                             "and BYTEPS_MAX_WORKERS (bpslaunch --min-workers/--max-workers) too.");
    }
    return Status::OK();
  }
  long value = 1;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_MIN_WORKERS", 1, c->num_worker, &value,
                              ("a number of workers in [1, DMLC_NUM_WORKER=" + std::to_string(c->num_worker) +
                               "]").c_str()));
  c->min_workers = static_cast<int>(value);
  value = c->num_worker;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_MAX_WORKERS", c->num_worker, 1 << 20, &value,
                              ("a number of workers >= DMLC_NUM_WORKER=" + std::to_string(c->num_worker)).c_str()));
  c->max_workers = static_cast<int>(value);
  return env.Seconds("BYTEPS_ELASTIC_TIMEOUT", &c->elastic_timeout_s);
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "?";
}

// Whole names only: "cuda_copy" is not "ud".
bool ListsRdmaTransport(const std::string& tls) {
  if (!tls.empty() && tls[0] == '^') return false;  // an exclusion list names what is not used
  std::stringstream names(tls);
  for (std::string name; std::getline(names, name, ',');) {
    if (name == "ib") return true;
    for (const char* family : {"rc", "ud", "dc"}) {
      if (name.rfind(family, 0) == 0 && (name.size() == 2 || name[2] == '_')) return true;
    }
  }
  return false;
}

int DefaultTcpIoThreads(unsigned cores) { return std::max(1, std::min(4, static_cast<int>(cores / 2))); }

bool Config::rdma() const { return enable_rdma || ListsRdmaTransport(!ucx_tls.empty() ? ucx_tls : user_ucx_tls); }

Environment ProcessEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::max(cores, 1);
}

int DefaultSumThreads() { return std::min(UsableCores(), kMaxDefaultSumThreads); }

// BYTEPS_BACKUP_WORKERS and BYTEPS_BACKUP_WINDOW, checked against the job's worker processes. A server or the
// scheduler knows them only where BYTEPS_LOCAL_SIZE is set (bpslaunch leaves it out of their environment);
// each worker checks the exact count.
Status ReadBackupWorkers(const EnvReader& env, Config* c) {
  long local_size = 1;
  const bool processes_known = c->role == Role::kWorker || env.Has("BYTEPS_LOCAL_SIZE");
  if (c->role != Role::kWorker && processes_known) {
    BPS_RETURN_IF_ERROR(env.Int("BYTEPS_LOCAL_SIZE", 1, 1024, &local_size, "a positive number of processes"));
  }
  const long processes = c->role == Role::kWorker ? c->worker_processes() : c->num_worker * local_size;
  long value = 0;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_BACKUP_WORKERS", 0, 1 << 20, &value,
                              "a whole number of worker processes >= 0 (0: no backup workers)"));
  if (value > 0 && processes_known && value >= processes) {
    return InvalidArgument("BYTEPS_BACKUP_WORKERS=" + std::to_string(value) + " leaves no worker to sum: the job has " +
                           std::to_string(processes) + " worker process(es); set it below that (a round completes "
                           "with the first workers' pushes, all but BYTEPS_BACKUP_WORKERS of them).");
  }
  if (value > 0 && c->elastic()) {
    return InvalidArgument("BYTEPS_BACKUP_WORKERS is set in an elastic job (BYTEPS_MIN_WORKERS/BYTEPS_MAX_WORKERS): "
                           "backup workers are offered for jobs of fixed size only; unset one or the other.");
  }
  c->backup_workers = static_cast<int>(value);
  value = c->backup_window;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_BACKUP_WINDOW", 1, 64, &value,
                              "a number of rounds in [1, 64] (how far a worker may fall behind)"));
  c->backup_window = static_cast<int>(value);
  return Status::OK();
}

StatusOr<Config> Config::FromEnvironment(const Environment& environment) {
  EnvReader env(environment);
  Config c;
  BPS_RETURN_IF_ERROR(ParseRole(env, &c.role));
  BPS_RETURN_IF_ERROR(env.Require("DMLC_PS_ROOT_URI", "set it to the scheduler's IP address."));
  BPS_RETURN_IF_ERROR(env.Require("DMLC_PS_ROOT_PORT", "set it to the scheduler's port."));
  BPS_RETURN_IF_ERROR(env.Require("DMLC_NUM_WORKER", "set it to the number of worker machines."));
  BPS_RETURN_IF_ERROR(env.Require("DMLC_NUM_SERVER", "set it to the number of server processes."));
  c.root_uri = env.String("DMLC_PS_ROOT_URI");
  BPS_RETURN_IF_ERROR(ResolveIPv4("DMLC_PS_ROOT_URI", &c.root_uri));

  long value = 0;
  BPS_RETURN_IF_ERROR(env.Int("DMLC_PS_ROOT_PORT", 1, 65535, &value, "a port number in [1, 65535]"));
  c.root_port = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(env.Int("DMLC_NUM_WORKER", 1, 1 << 20, &value, "a positive number of worker machines"));
  c.num_worker = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(env.Int("DMLC_NUM_SERVER", 1, 1 << 20, &value, "a positive number of servers"));
  c.num_server = static_cast<int>(value);

  BPS_RETURN_IF_ERROR(ReadElasticLimits(env, &c));

  if (c.role == Role::kWorker) {
    // An elastic job's places are [0, BYTEPS_MAX_WORKERS): workers beyond the first may join later.
    const int places = c.elastic() ? c.max_workers : c.num_worker;
    const std::string range = c.elastic()
                                  ? "an integer in [0, BYTEPS_MAX_WORKERS=" + std::to_string(c.max_workers) + ")"
                                  : "an integer in [0, DMLC_NUM_WORKER=" + std::to_string(c.num_worker) + ")";
    if (places > 1) {
      BPS_RETURN_IF_ERROR(
          env.Require("DMLC_WORKER_ID", ("each worker machine needs a distinct id, " + range + ".").c_str()));
    }
    value = 0;
    BPS_RETURN_IF_ERROR(env.Int("DMLC_WORKER_ID", 0, places - 1, &value, range.c_str()));
    c.worker_id = static_cast<int>(value);
    value = 1;
    BPS_RETURN_IF_ERROR(env.Int("BYTEPS_LOCAL_SIZE", 1, 1024, &value, "a positive number of processes"));
    c.local_size = static_cast<int>(value);
    value = 0;
    const std::string local_range = "an integer in [0, BYTEPS_LOCAL_SIZE=" + std::to_string(c.local_size) + ")";
    BPS_RETURN_IF_ERROR(env.Int("BYTEPS_LOCAL_RANK", 0, c.local_size - 1, &value, local_range.c_str()));
    c.local_rank = static_cast<int>(value);
    if (c.elastic() && c.local_size != 1) {
      return InvalidArgument("BYTEPS_LOCAL_SIZE=" + std::to_string(c.local_size) + " in an elastic job: elastic jobs "
                             "run one worker process per worker machine (BYTEPS_LOCAL_SIZE=1).");
    }
  }

  c.interface = env.String("DMLC_INTERFACE");
  c.node_host = env.String("DMLC_NODE_HOST");
  if (!c.node_host.empty()) BPS_RETURN_IF_ERROR(ResolveIPv4("DMLC_NODE_HOST", &c.node_host));
  value = 0;
  BPS_RETURN_IF_ERROR(env.Int("DMLC_ENABLE_RDMA", 0, 1, &value, "0 or 1"));
  c.enable_rdma = value == 1;
  c.ucx_tls = env.String("BYTEPS_UCX_TLS");
  c.user_ucx_tls = env.String("UCX_TLS");
  c.transport = c.enable_rdma || !c.ucx_tls.empty() ? TransportKind::kUcx : TransportKind::kTcp;
  if (env.Has("BYTEPS_TRANSPORT")) {
    const std::string kind = env.String("BYTEPS_TRANSPORT");
    if (kind != "tcp" && kind != "ucx") {
      return InvalidArgument("BYTEPS_TRANSPORT='" + kind + "' is invalid: it must be tcp or ucx.");
    }
    c.transport = kind == "tcp" ? TransportKind::kTcp : TransportKind::kUcx;
  }
  value = static_cast<long>(c.tcp_send_buffer_bytes);
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_TCP_SNDBUF", 0, 1L << 30, &value, "a number of bytes (0: the kernel's choice)"));
  c.tcp_send_buffer_bytes = static_cast<size_t>(value);
  value = DefaultTcpIoThreads(UsableCores());
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_TCP_IO_THREADS", 1, 256, &value, "a number of threads in [1, 256]"));
  c.tcp_io_threads = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(ReadJobSecret(env, &c.job_secret));

  value = static_cast<long>(c.partition_bytes);
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_PARTITION_BYTES", 8, 1L << 40, &value, "a number of bytes >= 8"));
  c.partition_bytes = static_cast<size_t>(value);
  value = static_cast<long>(c.slice_bytes);
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_SLICE_BYTES", 0, 1L << 40, &value, "a number of bytes (0: whole partitions)"));
  c.slice_bytes = static_cast<size_t>(value);
  value = static_cast<long>(c.min_spread_bytes);
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_MIN_SPREAD_BYTES", 8, 1L << 40, &value, "a number of bytes >= 8"));
  c.min_spread_bytes = static_cast<size_t>(value);
  if (env.Has("BYTEPS_SCHEDULING_CREDIT")) {
    value = 0;
    BPS_RETURN_IF_ERROR(
        env.Int("BYTEPS_SCHEDULING_CREDIT", 0, 1L << 50, &value, "a number of bytes in flight (0: unlimited)"));
    c.scheduling_credit = static_cast<size_t>(value);
  }
  value = DefaultSumThreads();
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_SERVER_ENGINE_THREAD", 1, 256, &value, "a positive number of threads"));
  c.server_sum_threads = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(env.Seconds("BYTEPS_TIMEOUT", &c.timeout_s));
  BPS_RETURN_IF_ERROR(ReadBackupWorkers(env, &c));
  value = 0;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_FORCE_DISTRIBUTED", 0, 1, &value, "0 or 1"));
  c.force_distributed = value == 1;
  value = 1;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_GPU_DIRECT_COPIES", 0, 1, &value, "0 or 1"));
  c.gpu_direct_copies = value == 1;
  value = 1;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_SHARED_MEMORY", 0, 1, &value, "0 or 1"));
  c.shared_memory = value == 1;
  value = 1;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_IN_PLACE_PUSHES", 0, 1, &value, "0 or 1"));
  c.in_place_pushes = value == 1;
  value = 1;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_FUSION", 0, 1, &value, "0 or 1"));
  c.fusion = value == 1;
  value = 0;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_TRACE_ON", 0, 1, &value, "0 or 1"));
  c.trace_on = value == 1;
  if (env.Has("BYTEPS_TRACE_DIR")) c.trace_dir = env.String("BYTEPS_TRACE_DIR");
  value = 0;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_ENABLE_ASYNC", 0, 1, &value, "0 or 1"));
  c.async = value == 1;
  if (env.Has("BYTEPS_STALENESS")) {
    value = 0;
    BPS_RETURN_IF_ERROR(env.Int("BYTEPS_STALENESS", 0, 1L << 30, &value,
                                "a whole number of steps >= 0 (0 behaves synchronously); unset it for unbounded "
                                "asynchronous training"));
    c.staleness = static_cast<int>(value);
    c.async = true;
  }
  const std::string compression = env.String("BYTEPS_COMPRESSION");
  if (c.async && !compression.empty() && compression != "none") {
    return InvalidArgument("BYTEPS_COMPRESSION='" + compression + "' is set for asynchronous training (" +
                           (env.Has("BYTEPS_STALENESS") ? "BYTEPS_STALENESS" : "BYTEPS_ENABLE_ASYNC") +
                           "), which does not offer gradient compression: its workers push changes of the "
                           "weights, not gradients to sum. Unset one of them.");
  }
  if (c.async && c.backup_workers > 0) {
    return InvalidArgument(std::string(env.Has("BYTEPS_STALENESS") ? "BYTEPS_STALENESS" : "BYTEPS_ENABLE_ASYNC") +
                           " and BYTEPS_BACKUP_WORKERS are both set: asynchronous training waits for no worker "
                           "already, and backup workers are a mode of synchronous training. Unset one of them.");
  }
  if (c.async) {
    c.shared_memory = false;
    c.fusion = false;
  }
  return c;
}

}  // namespace bps

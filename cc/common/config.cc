#include "cc/common/config.h"

#include <cerrno>
#include <cstdlib>

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
    if (end == text.c_str() || *end != '\0' || !(value > 0)) {
      return InvalidArgument(name + "='" + text + "' is invalid: it must be a positive number of seconds.");
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

Status ParseRole(const EnvReader& env, Role* role) {
  BPS_RETURN_IF_ERROR(env.Require("DMLC_ROLE", "set it to scheduler, server or worker (bpslaunch does this)."));
  std::string text = env.String("DMLC_ROLE");
  if (text == "scheduler") *role = Role::kScheduler;
  else if (text == "server") *role = Role::kServer;
  else if (text == "worker") *role = Role::kWorker;
  else return InvalidArgument("DMLC_ROLE='" + text + "' is invalid: it must be scheduler, server or worker.");
  return Status::OK();
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

Environment ProcessEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
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

  long value = 0;
  BPS_RETURN_IF_ERROR(env.Int("DMLC_PS_ROOT_PORT", 1, 65535, &value, "a port number in [1, 65535]"));
  c.root_port = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(env.Int("DMLC_NUM_WORKER", 1, 1 << 20, &value, "a positive number of worker machines"));
  c.num_worker = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(env.Int("DMLC_NUM_SERVER", 1, 1 << 20, &value, "a positive number of servers"));
  c.num_server = static_cast<int>(value);

  if (c.role == Role::kWorker) {
    if (c.num_worker > 1) {
      BPS_RETURN_IF_ERROR(env.Require(
          "DMLC_WORKER_ID", ("each worker machine needs a distinct id in [0, DMLC_NUM_WORKER=" +
                             std::to_string(c.num_worker) + ").").c_str()));
    }
    value = 0;
    std::string range = "an integer in [0, DMLC_NUM_WORKER=" + std::to_string(c.num_worker) + ")";
    BPS_RETURN_IF_ERROR(env.Int("DMLC_WORKER_ID", 0, c.num_worker - 1, &value, range.c_str()));
    c.worker_id = static_cast<int>(value);
    value = 1;
    BPS_RETURN_IF_ERROR(env.Int("BYTEPS_LOCAL_SIZE", 1, 1024, &value, "a positive number of processes"));
    c.local_size = static_cast<int>(value);
    value = 0;
    range = "an integer in [0, BYTEPS_LOCAL_SIZE=" + std::to_string(c.local_size) + ")";
    BPS_RETURN_IF_ERROR(env.Int("BYTEPS_LOCAL_RANK", 0, c.local_size - 1, &value, range.c_str()));
    c.local_rank = static_cast<int>(value);
  }

  c.interface = env.String("DMLC_INTERFACE");
  c.node_host = env.String("DMLC_NODE_HOST");
  value = 0;
  BPS_RETURN_IF_ERROR(env.Int("DMLC_ENABLE_RDMA", 0, 1, &value, "0 or 1"));
  c.enable_rdma = value == 1;
  c.ucx_tls = env.String("BYTEPS_UCX_TLS");

  value = static_cast<long>(c.partition_bytes);
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_PARTITION_BYTES", 8, 1L << 40, &value, "a number of bytes >= 8"));
  c.partition_bytes = static_cast<size_t>(value);
  value = static_cast<long>(c.slice_bytes);
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_SLICE_BYTES", 0, 1L << 40, &value, "a number of bytes (0: whole partitions)"));
  c.slice_bytes = static_cast<size_t>(value);
  if (env.Has("BYTEPS_SCHEDULING_CREDIT")) {
    value = 0;
    BPS_RETURN_IF_ERROR(
        env.Int("BYTEPS_SCHEDULING_CREDIT", 0, 1L << 50, &value, "a number of bytes in flight (0: unlimited)"));
    c.scheduling_credit = static_cast<size_t>(value);
  }
  value = c.server_engine_threads;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_SERVER_ENGINE_THREAD", 1, 256, &value, "a positive number of threads"));
  c.server_engine_threads = static_cast<int>(value);
  BPS_RETURN_IF_ERROR(env.Seconds("BYTEPS_TIMEOUT", &c.timeout_s));
  value = 0;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_FORCE_DISTRIBUTED", 0, 1, &value, "0 or 1"));
  c.force_distributed = value == 1;
  value = 1;
  BPS_RETURN_IF_ERROR(env.Int("BYTEPS_SHARED_MEMORY", 0, 1, &value, "0 or 1"));
  c.shared_memory = value == 1;
  return c;
}

}  // namespace bps

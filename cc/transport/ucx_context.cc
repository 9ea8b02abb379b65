#include "cc/transport/ucx_context.h"

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace bps {

Status FromUcs(ucs_status_t status, const std::string& what) {
  if (status == UCS_OK) return Status::OK();
  Code code = status == UCS_ERR_TIMED_OUT ? Code::kDeadlineExceeded : Code::kUnavailable;
  return Status(code, what + ": " + ucs_status_string(status));
}

StatusOr<std::unique_ptr<UcxContext>> UcxContext::Create(const UcxOptions& options) {
  std::unique_ptr<UcxContext> context(new UcxContext());
  BPS_RETURN_IF_ERROR(context->Init(options));  // on failure the destructor frees what was made
  return context;
}

UcxContext::~UcxContext() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

Status UcxContext::Init(const UcxOptions& options) {
  if (options.tcp_send_buffer_bytes > 0) {
    // Through the environment: ucp_config_modify does not reach the sockets of UCX 1.13's TCP connection
    // manager, which carry the data (checked with `ss -tm`). No overwrite: a user's setting stays.
    setenv("UCX_TCP_SNDBUF", std::to_string(options.tcp_send_buffer_bytes).c_str(), 0);
  }
  ucp_config_t* config = nullptr;
  BPS_RETURN_IF_ERROR(FromUcs(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read"));
  std::vector<std::pair<std::string, std::string>> settings;
  if (!options.tls.empty()) settings.emplace_back("TLS", options.tls);
  if (options.keepalive_interval_s > 0) {
    settings.emplace_back("KEEPALIVE_INTERVAL",
                          std::to_string(static_cast<long>(options.keepalive_interval_s * 1000)) + "ms");
  }
  for (const auto& [name, value] : settings) {
    ucs_status_t status = ucp_config_modify(config, name.c_str(), value.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      return InvalidArgument("UCX does not accept " + name + "=" + value +
                             (name == "TLS" ? " (BYTEPS_UCX_TLS)" : "") + ": " + ucs_status_string(status));
    }
  }
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  BPS_RETURN_IF_ERROR(FromUcs(status, "ucp_init (check BYTEPS_UCX_TLS / UCX_TLS)"));

  ucp_worker_params_t worker_params;
  std::memset(&worker_params, 0, sizeof(worker_params));
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread touches the worker
  BPS_RETURN_IF_ERROR(FromUcs(ucp_worker_create(context_, &worker_params, &worker_), "ucp_worker_create"));

  ucp_worker_attr_t attr;
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  BPS_RETURN_IF_ERROR(FromUcs(ucp_worker_query(worker_, &attr), "ucp_worker_query"));
  max_am_header_ = attr.max_am_header;
  return FromUcs(ucp_worker_get_efd(worker_, &event_fd_), "ucp_worker_get_efd");
}

Status UcxContext::SetAmHandler(unsigned id, ucp_am_recv_callback_t cb, void* arg) {
  ucp_am_handler_param_t hp;
  std::memset(&hp, 0, sizeof(hp));
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;  // one callback per message, however many fragments it took
  hp.id = id;
  hp.cb = cb;
  hp.arg = arg;
  return FromUcs(ucp_worker_set_am_recv_handler(worker_, &hp), "ucp_worker_set_am_recv_handler");
}

}  // namespace bps

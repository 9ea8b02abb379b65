// UCX as a job configures it: the ucp context (UCX_TLS, keepalive, TCP socket buffers; active messages
// with wake-ups) and the one ucp worker the progress thread drives.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>

#include "cc/common/status.h"
#include "cc/transport/ucx_transport.h"

namespace bps {

// A UCX status as ours: timeouts are DEADLINE_EXCEEDED, every other failure UNAVAILABLE.
Status FromUcs(ucs_status_t status, const std::string& what);

class UcxContext {
 public:
  static StatusOr<std::unique_ptr<UcxContext>> Create(const UcxOptions& options);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_worker_h worker() const { return worker_; }
  // The largest header an active message carries; larger ones travel as its data.
  size_t max_am_header() const { return max_am_header_; }
  // Readable when the worker has events (after ucp_worker_arm).
  int event_fd() const { return event_fd_; }
  // Active messages `id` arrive at `cb(arg, ...)`, one call per whole message.
  Status SetAmHandler(unsigned id, ucp_am_recv_callback_t cb, void* arg);

 private:
  UcxContext() = default;
  Status Init(const UcxOptions& options);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  size_t max_am_header_ = 0;
  int event_fd_ = -1;
};

}  // namespace bps

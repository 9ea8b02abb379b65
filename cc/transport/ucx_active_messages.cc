#include "cc/transport/ucx_active_messages.h"

#include <cstring>

#include "cc/transport/ucx_context.h"

namespace bps {
namespace {

struct SendContext {
  std::string header;  // UCX reads it until the send completes
  SendCallback on_sent;
};

void OnSent(void* request, ucs_status_t status, void* user_data) {
  auto* context = static_cast<SendContext*>(user_data);
  if (context->on_sent) context->on_sent(FromUcs(status, "send"));
  delete context;
  ucp_request_free(request);
}

}  // namespace

ucs_status_t SendAm(ucp_ep_h ep, unsigned id, std::string header, const void* data, size_t length,
                    SendCallback on_sent, bool eager) {
  auto* context = new SendContext{std::move(header), std::move(on_sent)};
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_REPLY | (eager ? UCP_AM_SEND_FLAG_EAGER : 0);
  param.cb.send = &OnSent;
  param.user_data = context;
  ucs_status_ptr_t request = ucp_am_send_nbx(ep, id, context->header.data(), context->header.size(), data,
                                             length, &param);
  if (UCS_PTR_IS_PTR(request)) return UCS_INPROGRESS;  // OnSent finishes it
  ucs_status_t status = UCS_PTR_STATUS(request);
  if (context->on_sent) context->on_sent(FromUcs(status, "send"));
  delete context;
  return status;
}

}  // namespace bps

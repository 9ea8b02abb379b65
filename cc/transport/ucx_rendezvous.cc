#include "cc/transport/ucx_rendezvous.h"

#include <cstring>

namespace bps {

void RendezvousReceives::Expect(void* descriptor, PeerId from, std::string header, void* destination,
                                size_t length) {
  pending_.push_back(Pending{descriptor, destination, length, from, std::move(header), nullptr});
}

void RendezvousReceives::ExpectLargeHeader(void* descriptor, PeerId from, size_t length) {
  auto owned = std::make_unique<std::string>(length, '\0');
  void* destination = &(*owned)[0];
  pending_.push_back(Pending{descriptor, destination, length, from, "", std::move(owned)});
}

void RendezvousReceives::Delivered(Pending& receive, bool ok) {
  if (receive.large_header) {
    if (ok) deliver_(receive.from, *receive.large_header, nullptr, 0);
    return;
  }
  deliver_(receive.from, receive.header, ok ? receive.destination : nullptr, receive.length);
}

void RendezvousReceives::FetchAll(ucp_worker_h worker) {
  std::vector<Pending> batch;
  batch.swap(pending_);
  for (Pending& receive : batch) {
    auto* fetch = new Fetch{this, std::move(receive)};
    ucp_request_param_t param;
    std::memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.recv_am = &OnReceived;
    param.user_data = fetch;
    ucs_status_ptr_t request = ucp_am_recv_data_nbx(worker, fetch->receive.descriptor, fetch->receive.destination,
                                                    fetch->receive.length, &param);
    if (UCS_PTR_IS_PTR(request)) continue;  // OnReceived finishes it
    Delivered(fetch->receive, UCS_PTR_STATUS(request) == UCS_OK);
    delete fetch;
  }
}

void RendezvousReceives::OnReceived(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* fetch = static_cast<Fetch*>(user_data);
  fetch->self->Delivered(fetch->receive, status == UCS_OK);
  delete fetch;
  ucp_request_free(request);
}

}  // namespace bps

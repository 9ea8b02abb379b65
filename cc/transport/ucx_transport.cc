// The UCX transport's progress loop, its peers and their loss, sending and receiving, shutdown
// (ucx_transport_internal.h says where the rest is).
#include "cc/transport/ucx_transport.h"

#include <cstring>
#include <vector>

#include "cc/common/clock.h"
#include "cc/transport/address.h"
#include "cc/transport/ucx_active_messages.h"
#include "cc/transport/ucx_transport_internal.h"

namespace bps {
namespace ucx_internal {

Status UcxTransport::Init(const UcxOptions& options) {
  options_ = options;
  auto ucx = UcxContext::Create(options);
  if (!ucx.ok()) return ucx.status();
  ucx_ = std::move(ucx.value());
  struct Handler {
    unsigned id;
    ucp_am_recv_callback_t cb;
  };
  for (Handler h : {Handler{kAmMessage, &OnAm}, Handler{kAmLargeHeader, &OnLargeHeaderAm},
                    Handler{kAmHello, &OnHelloAm}, Handler{kAmHelloAck, &OnHelloAckAm},
                    Handler{kAmProof, &OnProofAm}, Handler{kAmVerdict, &OnVerdictAm}}) {
    BPS_RETURN_IF_ERROR(ucx_->SetAmHandler(h.id, h.cb, this));
  }
  BPS_RETURN_IF_ERROR(loop_.Watch(ucx_->event_fd()));
  return loop_.Start([this] { ProgressLoop(); });
}

void UcxTransport::SleepUntilEvent() {
  if (ucp_worker_arm(ucx_->worker()) == UCS_ERR_BUSY) return;
  if (!loop_.nothing_posted()) return;
  epoll_event events[2];
  loop_.Wait(events, 2, 100);  // bounded so a missed wake-up costs at most 100 ms
}

void UcxTransport::ProgressLoop() {
  // Progress until there is nothing to do, then sleep on the event fds. No spinning: workers and servers
  // share cores with training, and on a busy machine a spinning thread delays the very peer it waits for
  // (2 cores, 4 workers + 4 servers: BERT-like steps 4-8% faster without a 50 us spin, small push_pulls too).
  double next_expiry = NowSeconds() + 1;
  while (loop_.running()) {
    loop_.RunPosted();
    if (NowSeconds() >= next_expiry) {
      ExpireHandshakes();
      next_expiry = NowSeconds() + 1;
    }
    bool active = false;
    while (ucp_worker_progress(ucx_->worker()) != 0) active = true;
    if (!rendezvous_.empty()) {
      rendezvous_.FetchAll(ucx_->worker());
      active = true;
    }
    if (!active) SleepUntilEvent();
  }
}

PeerId UcxTransport::AddPeer(ucp_ep_h ep, std::string name) {
  loop_.AssertOnThread();
  PeerId id = next_peer_++;
  std::lock_guard<std::mutex> lock(mu_);
  auto host = ParseHostPort(name);
  peers_[id].other_host = !host.ok() || host.value().host != local_host_;
  peers_[id].ep = ep;
  peers_[id].name = std::move(name);
  peer_of_ep_[ep] = id;
  return id;
}

PeerId UcxTransport::PeerOf(const ucp_am_recv_param_t* param) {
  loop_.AssertOnThread();
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return -1;
  auto it = peer_of_ep_.find(param->reply_ep);
  return it == peer_of_ep_.end() ? -1 : it->second;
}

std::string UcxTransport::PeerName(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(peer);
  return it == peers_.end() ? "unknown peer" : it->second.name;
}

void UcxTransport::MarkLost(PeerId id, const Status& why) {
  loop_.AssertOnThread();
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.lost) return;
  it->second.lost = true;
  peer_of_ep_.erase(it->second.ep);
  ucp_ep_h ep = it->second.ep;
  it->second.ep = nullptr;
  // Closing from inside UCX's error callback is not allowed: do it on the next loop turn.
  loop_.Post([ep] { ForceClose(ep); });
  if (it->second.hello != nullptr) {
    it->second.hello->set_value(why);
    it->second.hello = nullptr;
  } else if (handler_ != nullptr && !loop_.stopping() && it->second.authenticated) {
    handler_->OnPeerLost(id, why);
  }
}

void UcxTransport::ForceClose(ucp_ep_h ep) {
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* request = ucp_ep_close_nbx(ep, &param);
  if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
}

void UcxTransport::OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<UcxTransport*>(arg);
  auto it = self->peer_of_ep_.find(ep);
  if (it == self->peer_of_ep_.end()) return;
  PeerId id = it->second;
  self->MarkLost(id, Unavailable("connection to " + self->peers_[id].name + " lost (" +
                                 ucs_status_string(status) + ")"));
}

void UcxTransport::Send(PeerId to, std::string header, const void* payload, size_t length,
                        SendCallback on_sent) {
  loop_.Post([this, to, header = std::move(header), payload, length, on_sent = std::move(on_sent)]() mutable {
    auto it = peers_.find(to);
    if (it == peers_.end() || it->second.lost) {
      if (on_sent) on_sent(Unavailable("connection to " + PeerName(to) + " is closed"));
      return;
    }
    if (header.size() > ucx_->max_am_header()) {
      if (length != 0) {
        if (on_sent) on_sent(Internal("a message with a payload has a header larger than UCX allows"));
        return;
      }
      // The header travels as the data; keep it alive in the context until the send completes.
      auto* owned = new std::string(std::move(header));
      SendAm(it->second.ep, kAmLargeHeader, std::string(), owned->data(), owned->size(),
             [owned, on_sent](const Status& status) {
               delete owned;
               if (on_sent) on_sent(status);
             });
      return;
    }
    SendAm(it->second.ep, kAmMessage, std::move(header), payload, length, std::move(on_sent), UseEager(it->second));
  });
}

void UcxTransport::Deliver(PeerId from, const std::string& header, void* payload, size_t length) {
  if (handler_ != nullptr && !loop_.stopping()) handler_->OnMessage(from, header, payload, length);
}

ucs_status_t UcxTransport::OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  PeerId from = self->PeerOf(param);
  if (from < 0 || self->handler_ == nullptr || !self->peers_[from].authenticated) {
    return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_ERR_REJECTED : UCS_OK;
  }
  std::string text(static_cast<const char*>(header), header_length);
  if (length == 0) {
    self->Deliver(from, text, nullptr, 0);
    return UCS_OK;
  }
  void* destination = self->handler_->PayloadDestination(from, text, length);
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    if (destination == nullptr) {
      self->Deliver(from, text, nullptr, length);
      return UCS_ERR_REJECTED;  // the sender's send completes with this error
    }
    self->rendezvous_.Expect(data, from, std::move(text), destination, length);
    return UCS_INPROGRESS;
  }
  if (destination != nullptr) std::memcpy(destination, data, length);
  self->Deliver(from, text, destination, length);
  return UCS_OK;
}

ucs_status_t UcxTransport::OnLargeHeaderAm(void* arg, const void*, size_t, void* data, size_t length,
                                           const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  PeerId from = self->PeerOf(param);
  if (from < 0 || !self->peers_[from].authenticated) {
    return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_ERR_REJECTED : UCS_OK;
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    self->rendezvous_.ExpectLargeHeader(data, from, length);
    return UCS_INPROGRESS;
  }
  self->Deliver(from, std::string(static_cast<const char*>(data), length), nullptr, 0);
  return UCS_OK;
}

void UcxTransport::CloseAll(double timeout_s) {
  loop_.AssertOnThread();
  std::vector<void*> closing;
  for (auto& entry : peers_) {
    Peer& peer = entry.second;
    if (peer.lost || peer.ep == nullptr) continue;
    peer.lost = true;
    ucp_request_param_t param;
    std::memset(&param, 0, sizeof(param));  // flush mode: pending sends finish first
    void* request = ucp_ep_close_nbx(peer.ep, &param);
    if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
    peer.ep = nullptr;
  }
  peer_of_ep_.clear();
  Deadline deadline(timeout_s);
  ucp_worker_h worker = ucx_->worker();
  for (void* request : closing) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && !deadline.expired()) {
      ucp_worker_progress(worker);
    }
    if (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_request_cancel(worker, request);
    ucp_request_free(request);
  }
  if (listener_ != nullptr) {
    ucp_listener_destroy(listener_);
    listener_ = nullptr;
  }
}

void UcxTransport::Shutdown(double timeout_s) {
  const bool stopped = loop_.Stop([this, timeout_s] {
    CloseAll(timeout_s);
    loop_.Exit();
  });
  if (stopped) ucx_.reset();  // after the thread: it was the only user
}

}  // namespace ucx_internal

StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(const UcxOptions& options) {
  auto transport = std::make_unique<ucx_internal::UcxTransport>();
  BPS_RETURN_IF_ERROR(transport->Init(options));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace bps

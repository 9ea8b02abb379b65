// Listening, accepting and connecting for the UCX transport. UCX's connection manager sets up endpoints;
// a connection counts only once the handshake (ucx_handshake.cc) proved the job's secret.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <thread>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/transport/address.h"
#include "cc/transport/ucx_active_messages.h"
#include "cc/transport/ucx_transport_internal.h"

namespace bps {
namespace ucx_internal {
namespace {

std::string SockaddrName(const sockaddr_storage& addr) {
  if (addr.ss_family != AF_INET) return "peer";
  const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
}

}  // namespace

void UcxTransport::OnConnectionRequest(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<UcxTransport*>(arg);
  ucp_conn_request_attr_t attr;
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  std::string name = "peer";
  if (ucp_conn_request_query(request, &attr) == UCS_OK) name = SockaddrName(attr.client_address);
  if (self->loop_.stopping()) {
    ucp_listener_reject(self->listener_, request);
    return;
  }
  ucp_ep_params_t params;
  std::memset(&params, 0, sizeof(params));
  // No error handling mode: UCX takes the client's (it refuses a different one), see Link.
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_handler.cb = &OnEndpointError;
  params.err_handler.arg = self;
  ucp_ep_h ep = nullptr;
  ucs_status_t status = ucp_ep_create(self->ucx_->worker(), &params, &ep);
  if (status != UCS_OK) {
    BPS_LOG(Warning) << "could not accept a connection from " << name << ": " << ucs_status_string(status);
    return;
  }
  self->AddPeer(ep, name);
}

StatusOr<std::string> UcxTransport::Listen(const std::string& host, int port) {
  auto bound = std::make_shared<std::string>();
  Status status = loop_.RunOnThread([this, bound, host, port]() -> Status {
    sockaddr_in addr;
    if (!Ipv4SocketAddress(host, port, &addr)) {
      return InvalidArgument("'" + host + "' is not an IPv4 address to listen on");
    }
    ucp_listener_params_t params;
    std::memset(&params, 0, sizeof(params));
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = sizeof(addr);
    params.conn_handler.cb = &OnConnectionRequest;
    params.conn_handler.arg = this;
    BPS_RETURN_IF_ERROR(FromUcs(ucp_listener_create(ucx_->worker(), &params, &listener_),
                                "cannot listen on " + host + ":" + std::to_string(port)));
    ucp_listener_attr_t attr;
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    BPS_RETURN_IF_ERROR(FromUcs(ucp_listener_query(listener_, &attr), "ucp_listener_query"));
    *bound = host + ":" + std::to_string(ntohs(reinterpret_cast<sockaddr_in*>(&attr.sockaddr)->sin_port));
    local_host_ = host;
    return Status::OK();
  });
  if (!status.ok()) return status;
  return *bound;
}

StatusOr<PeerId> UcxTransport::Connect(const std::string& address, double timeout_s, Link link) {
  auto parsed = ParseHostPort(address);
  if (!parsed.ok()) return parsed.status();
  // See Link: only an unwatched endpoint may use shared memory. The accepting side takes the mode from us.
  bool watched = link == Link::kControl || parsed.value().host != local_host_;
  Deadline deadline(timeout_s);
  Status last = Unavailable("no attempt made");
  while (!deadline.expired()) {
    auto hello = std::make_shared<std::promise<Status>>();
    std::future<Status> answered = hello->get_future();
    auto id = std::make_shared<PeerId>(-1);
    const HostPort target = parsed.value();
    Status started = loop_.RunOnThread([this, hello, id, target, address, watched]() -> Status {
      sockaddr_in addr;
      if (!Ipv4SocketAddress(target.host, target.port, &addr)) {
        return InvalidArgument("'" + target.host + "' is not an IPv4 address");
      }
      ucp_ep_params_t params;
      std::memset(&params, 0, sizeof(params));
      params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                          UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
      params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
      params.sockaddr.addrlen = sizeof(addr);
      params.err_mode = watched ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
      params.err_handler.cb = &OnEndpointError;
      params.err_handler.arg = this;
      ucp_ep_h ep = nullptr;
      BPS_RETURN_IF_ERROR(FromUcs(ucp_ep_create(ucx_->worker(), &params, &ep), "ucp_ep_create to " + address));
      *id = AddPeer(ep, address);
      peers_[*id].hello = hello;
      peers_[*id].connecting = std::make_unique<ClientHandshake>(options_.secret);
      ucs_status_t sent = SendAm(ep, kAmHello, std::string(), nullptr, 0, nullptr);
      if (UCS_STATUS_IS_ERR(sent)) MarkLost(*id, FromUcs(sent, "hello to " + address));
      return Status::OK();
    });
    if (!started.ok()) return started;
    double wait = std::min(deadline.remaining(), 5.0);
    bool got_answer = answered.wait_for(std::chrono::duration<double>(wait)) == std::future_status::ready;
    if (got_answer) {
      last = answered.get();
      if (last.ok()) return *id;
      if (last.code() == Code::kUnauthenticated) return Unauthenticated(address + ": " + last.message());
    } else {
      last = DeadlineExceeded("no answer from " + address);
      loop_.Post([this, id, hello] { ForgetConnectAttempt(*id, hello); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int>(200, deadline.remaining() * 1000)));
  }
  return Unavailable("cannot connect to " + address + " within " + std::to_string(int(timeout_s)) +
                     " s (last error: " + last.message() + "). Is the process there running?");
}

void UcxTransport::ForgetConnectAttempt(PeerId id, const std::shared_ptr<std::promise<Status>>& hello) {
  loop_.AssertOnThread();
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.hello != hello) return;
  it->second.hello = nullptr;
  it->second.lost = true;
  peer_of_ep_.erase(it->second.ep);
  ForceClose(it->second.ep);
  it->second.ep = nullptr;
}

}  // namespace ucx_internal
}  // namespace bps

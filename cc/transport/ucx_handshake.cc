// The UCX transport's proof of the job's secret (handshake.h), in active messages: the client says hello,
// the server answers with its challenge, the client proves itself, the server gives its verdict. Until
// then nothing a peer sends is delivered.
#include <vector>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/transport/ucx_active_messages.h"
#include "cc/transport/ucx_transport_internal.h"

namespace bps {
namespace ucx_internal {
namespace {

constexpr double kHandshakeTimeoutS = 10;

}  // namespace

ucs_status_t UcxTransport::OnHelloAm(void* arg, const void*, size_t, void*, size_t,
                                     const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  PeerId id = self->PeerOf(param);
  auto it = self->peers_.find(id);
  if (it == self->peers_.end() || it->second.authenticated || it->second.accepting) return UCS_OK;
  it->second.accepting = std::make_unique<ServerHandshake>(self->options_.secret);
  it->second.accepted_at = NowSeconds();
  SendAm(param->reply_ep, kAmHelloAck, it->second.accepting->hello(), nullptr, 0, nullptr);
  return UCS_OK;
}

ucs_status_t UcxTransport::OnHelloAckAm(void* arg, const void* header, size_t header_length, void*, size_t,
                                        const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  PeerId id = self->PeerOf(param);
  auto it = self->peers_.find(id);
  if (it == self->peers_.end() || it->second.hello == nullptr || !it->second.connecting) return UCS_OK;
  auto answer = it->second.connecting->Answer(std::string(static_cast<const char*>(header), header_length));
  if (!answer.ok()) {
    self->ConnectAnswered(id, answer.status());
    return UCS_OK;
  }
  SendAm(param->reply_ep, kAmProof, answer.value(), nullptr, 0, nullptr);
  return UCS_OK;
}

ucs_status_t UcxTransport::OnProofAm(void* arg, const void* header, size_t header_length, void*, size_t,
                                     const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  PeerId id = self->PeerOf(param);
  auto it = self->peers_.find(id);
  if (it == self->peers_.end() || !it->second.accepting) return UCS_OK;
  std::string reply, why;
  auto result = it->second.accepting->Feed(static_cast<const char*>(header), header_length, &reply, &why);
  if (result == ServerHandshake::Result::kNeedMore) {
    result = ServerHandshake::Result::kRejected;
    why = "its answer to the handshake is too short";
    reply = std::string(1, '\x01');
  }
  SendAm(param->reply_ep, kAmVerdict, reply, nullptr, 0, nullptr);
  if (result == ServerHandshake::Result::kRejected) {
    self->DropUnauthenticated(id, why);
    return UCS_OK;
  }
  it->second.accepting.reset();
  it->second.authenticated = true;
  return UCS_OK;
}

ucs_status_t UcxTransport::OnVerdictAm(void* arg, const void* header, size_t header_length, void*, size_t,
                                       const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  PeerId id = self->PeerOf(param);
  auto it = self->peers_.find(id);
  if (it == self->peers_.end() || !it->second.connecting || it->second.hello == nullptr) return UCS_OK;
  Status verdict = it->second.connecting->Check(std::string(static_cast<const char*>(header), header_length));
  it->second.connecting.reset();
  if (verdict.ok()) it->second.authenticated = true;
  self->ConnectAnswered(id, verdict);
  return UCS_OK;
}

void UcxTransport::ConnectAnswered(PeerId id, const Status& outcome) {
  Peer& peer = peers_[id];
  peer.hello->set_value(outcome);
  peer.hello = nullptr;
  if (!outcome.ok()) DropUnauthenticated(id, outcome.message());
}

void UcxTransport::DropUnauthenticated(PeerId id, const std::string& why) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  BPS_LOG(Warning) << "turned away " << it->second.name << ": " << why;
  it->second.accepting.reset();
  it->second.connecting.reset();
  MarkLost(id, Unauthenticated(why));  // not reported: it never was a member
}

void UcxTransport::ExpireHandshakes() {
  const double now = NowSeconds();
  std::vector<PeerId> expired;
  for (auto& entry : peers_) {
    if (entry.second.accepting && !entry.second.lost && now - entry.second.accepted_at > kHandshakeTimeoutS) {
      expired.push_back(entry.first);
    }
  }
  for (PeerId id : expired) DropUnauthenticated(id, "it did not complete the handshake in time");
}

}  // namespace ucx_internal
}  // namespace bps

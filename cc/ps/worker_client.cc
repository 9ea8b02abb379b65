#include "cc/ps/worker_client.h"

namespace bps {

WorkerClient::WorkerClient(const Config& config, Transport* transport)
    : config_(config),
      transport_(transport),
      servers_(config_, transport),
      shared_(config_.shared_memory, config_.in_place_pushes),
      lifecycle_(config_, transport, &servers_, &requests_, &shared_),
      operations_(config_, transport, &lifecycle_, &servers_, &requests_, &shared_) {}

Status WorkerClient::Start() {
  transport_->SetHandler(this);
  return lifecycle_.Start();
}

Status WorkerClient::NextGeneration() { return lifecycle_.NextGeneration(); }

void WorkerClient::OnMessage(PeerId from, const std::string& header, void* payload, size_t length) {
  auto decoded = Message::Decode(header);
  if (!decoded.ok()) {
    dropped_.Warn("worker dropped a malformed message from " + transport_->PeerName(from));
    return;
  }
  Message& m = decoded.value();
  if (from == lifecycle_.scheduler()) {
    if (m.type == MessageType::kDeclareReply) return operations_.OnReply(from, m, payload, length);
    if (lifecycle_.OnSchedulerMessage(m)) return;
  } else if (m.type == MessageType::kPullReply) {
    return operations_.OnReply(from, m, payload, length);
  } else if (m.type == MessageType::kPullReplyMany) {
    return operations_.OnFusedReply(from, m, payload);
  } else if (m.type == MessageType::kIdentifyReply) {
    return servers_.OnIdentifyReply(from, m.status());
  }
  dropped_.Warn(std::string("worker dropped ") + MessageTypeName(m.type) + " from " + transport_->PeerName(from));
}

}  // namespace bps

#include "cc/ps/fused_reply.h"

#include <memory>

namespace bps {

void FusedReply::Set(size_t index, const Message& reply, const void* payload, size_t bytes) {
  Message header;
  std::shared_ptr<std::string> joined;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= body_.members.size() || remaining_ == 0) return;
    body_.members[index] = FusedBody::Member{reply, payload == nullptr ? 0 : bytes};
    if (payload != nullptr && bytes > 0) payloads_[index].assign(static_cast<const char*>(payload), bytes);
    if (--remaining_ > 0) return;
    joined = std::make_shared<std::string>();
    joined->reserve(body_.payload_bytes());
    for (const std::string& part : payloads_) joined->append(part);
    payloads_.clear();
    header.type = MessageType::kPullReplyMany;
    header.text = body_.Encode();
  }
  const void* data = joined->empty() ? nullptr : joined->data();
  const size_t length = joined->size();
  transport_->Send(peer_, header.Encode(), data, length, [joined](const Status&) {});
}

}  // namespace bps

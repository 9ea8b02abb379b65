#include "cc/ps/request_table.h"

#include <utility>
#include <vector>

#include "cc/common/clock.h"

namespace bps {

void Request::Answer(const Status& status) {
  if (declare_done) {
    declare_done(status);
  } else {
    done(status);
  }
}

uint64_t RequestTable::Track(Request request) {
  request.started = NowSeconds();
  Status refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused = !failure_.ok() ? failure_ : generation_failure_;
    if (refused.ok()) {
      const uint64_t id = next_id_++;
      requests_[id] = std::move(request);
      return id;
    }
  }
  // The job (or the generation) failed between the caller's check and now: every request known then has
  // been answered, and this one would otherwise wait for a reply that cannot come.
  request.Answer(refused);
  return 0;
}

Status RequestTable::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Status RequestTable::generation_failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_failure_;
}

Status RequestTable::refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !failure_.ok() ? failure_ : generation_failure_;
}

bool RequestTable::SetFailure(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.ok()) return false;
  failure_ = why;
  return true;
}

bool RequestTable::SetGenerationFailure(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.ok() || !generation_failure_.ok()) return false;
  generation_failure_ = why;
  return true;
}

void RequestTable::StartGeneration() {
  std::lock_guard<std::mutex> lock(mu_);
  generation_failure_ = Status::OK();
  ++generations_;
}

uint64_t RequestTable::generations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generations_;
}

void RequestTable::FailAll(const Status& why, PeerId lost) {
  std::vector<Request> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = requests_.begin(); it != requests_.end();) {
      Request& r = it->second;
      if ((r.sending || r.receiving) && r.peer != lost) {
        if (r.deferred.ok()) r.deferred = why;
        ++it;
        continue;
      }
      failed.push_back(std::move(r));
      it = requests_.erase(it);
    }
  }
  for (Request& r : failed) r.Answer(why);
}

void RequestTable::FailPeer(const Status& why, PeerId lost) {
  std::vector<Request> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = requests_.begin(); it != requests_.end();) {
      if (it->second.peer != lost) {
        ++it;
        continue;
      }
      failed.push_back(std::move(it->second));
      it = requests_.erase(it);
    }
  }
  for (Request& r : failed) r.Answer(why);
}

void RequestTable::FailExpired(double now, double limit_s, const std::function<Status(const Request&)>& why) {
  std::vector<Request> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = requests_.begin(); it != requests_.end();) {
      if (now - it->second.started < limit_s) {
        ++it;
        continue;
      }
      expired.push_back(std::move(it->second));
      it = requests_.erase(it);
    }
  }
  for (Request& r : expired) r.Answer(why(r));
}

void* RequestTable::ReceiveInto(uint64_t id, PeerId from, size_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.peer != from || it->second.bytes != length) return nullptr;
  // The transport writes into the caller's memory until the message is whole: the request waits for it.
  if (it->second.destination != nullptr) it->second.receiving = true;
  return it->second.destination;
}

void RequestTable::Sent(uint64_t id) {
  Request r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    it->second.sending = false;
    if (it->second.deferred.ok() || it->second.receiving) return;
    r = std::move(it->second);
    requests_.erase(it);
  }
  r.Answer(r.deferred);
}

std::optional<Request> RequestTable::Take(uint64_t id, PeerId from) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;             // already answered (timeout or failure)
  if (from >= 0 && it->second.peer != from) return std::nullopt;  // not from the peer it went to
  Request r = std::move(it->second);
  requests_.erase(it);
  return r;
}

size_t RequestTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

}  // namespace bps

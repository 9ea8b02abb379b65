#include "cc/runtime/started_requests.h"

#include <chrono>

namespace bps {

StartedRequests& StartedRequests::Process() {
  static StartedRequests* table = new StartedRequests();  // never destroyed: custom calls may run at exit
  return *table;
}

std::function<void(const Status&)> StartedRequests::Start(const std::string& name, double timeout_s) {
  auto request = std::make_shared<Request>();
  request->timeout_s = timeout_s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_[name].push_back(request);
  }
  return [request](const Status& status) {
    std::lock_guard<std::mutex> lock(request->mu);
    request->status = status;
    request->done = true;
    request->completed.notify_all();
  };
}

Status StartedRequests::Finish(const std::string& name, const std::function<void(const std::string&)>& abort) {
  std::shared_ptr<Request> request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = started_.find(name);
    if (it == started_.end()) {
      return Internal("push_pull '" + name + "': its done call ran without a start call before it");
    }
    request = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) started_.erase(it);
  }
  std::unique_lock<std::mutex> lock(request->mu);
  const auto bound = std::chrono::duration<double>(2 * request->timeout_s);
  if (!request->completed.wait_for(lock, bound, [&] { return request->done; })) {
    lock.unlock();
    abort("push_pull '" + name + "' did not complete within twice BYTEPS_TIMEOUT");
    lock.lock();
    request->completed.wait(lock, [&] { return request->done; });
  }
  return request->status;
}

size_t StartedRequests::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t count = 0;
  for (const auto& entry : started_) count += entry.second.size();
  return count;
}

}  // namespace bps

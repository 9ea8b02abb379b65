// Requests whose start and finish happen in two separate calls, paired by tensor name: a compiled XLA
// computation lowers each push_pull into a start custom call (enqueue, return at once) and a done custom
// call (wait for the result), so that the computation goes on between the two. Within one computation a
// name is used once, and each computation runs a name's start before its done, so the oldest start of a
// name belongs to the next done of that name.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cc/common/status.h"

namespace bps {

class StartedRequests {
 public:
  // The process's table (the custom calls are free functions).
  static StartedRequests& Process();

  // Records a request started under `name`; the returned callback completes it (give it to the engine as
  // the request's done). `timeout_s`: how long Finish waits for it before the job is aborted.
  std::function<void(const Status&)> Start(const std::string& name, double timeout_s);

  // Waits for the oldest unfinished request started under `name` and returns its status. The engine fails
  // every request within its own timeouts; should a completion still not come within twice the request's
  // timeout, `abort(reason)` is called (the engine then fails its requests at once) and the wait goes on,
  // since the engine may still write into the request's buffer until it completes the request.
  Status Finish(const std::string& name, const std::function<void(const std::string&)>& abort);

  // Requests started and not yet finished (for tests).
  size_t pending() const;

 private:
  struct Request {
    std::mutex mu;
    std::condition_variable completed;
    bool done = false;
    Status status;
    double timeout_s = 0;
  };

  mutable std::mutex mu_;
  std::map<std::string, std::deque<std::shared_ptr<Request>>> started_;
};

}  // namespace bps

// Where a push's bytes really are when they are not in host memory (a GPU tensor): the worker's requests
// name an address in a host staging buffer, and a DataMover moves the bytes that address stands for
// straight to where they go on the host (the staging itself, or a same-host server's shared memory), and
// a sum back. So a GPU push to a server on its host crosses host memory once each way, not through the
// staging and a second copy.
#pragma once

#include <cstddef>
#include <functional>

#include "cc/common/status.h"

namespace bps {

class DataMover {
 public:
  // A copy started and not yet waited for: calling it waits until the bytes are there and says how it went.
  // Call it exactly once, on a thread that may block.
  using InFlight = std::function<Status()>;

  virtual ~DataMover() = default;
  // Copies the bytes that `staged` (an address in the request's input) stands for into `host` (`staged`
  // itself, or elsewhere on the host); returns once they are there. Never called on a thread that may not
  // block or call the mover's API (the caller's business: see GpuPushPull).
  virtual Status ToHost(const void* staged, void* host, size_t bytes) = 0;
  // The reverse: the `bytes` at `host` become what `staged` (an address in the request's output) stands
  // for; returns once they are there.
  virtual Status FromHost(void* staged, const void* host, size_t bytes) = 0;
  // Both fail with DeadlineExceeded when a copy did not finish in time and may still write later: the
  // worker then aborts the job, since that memory is the next rounds' (WorkerOperations).

  // The same copies, started without waiting for them, so that a caller with many small copies pays a
  // GPU's latency once for all of them instead of once each. The mover, and the memory at `staged` and
  // `host`, must stay until the returned wait has returned (it fails like ToHost and FromHost, with
  // DeadlineExceeded too). By default the copy is done before these return.
  virtual InFlight StartToHost(const void* staged, void* host, size_t bytes) {
    Status copied = ToHost(staged, host, bytes);
    return [copied] { return copied; };
  }
  virtual InFlight StartFromHost(void* staged, const void* host, size_t bytes) {
    Status copied = FromHost(staged, host, bytes);
    return [copied] { return copied; };
  }
};

}  // namespace bps

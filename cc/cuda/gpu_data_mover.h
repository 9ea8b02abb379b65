// The DataMover (cc/ps/data_mover.h) of one GPU push_pull: the engine's requests name addresses in the
// tensor's pinned staging, and this copies the GPU memory they stand for straight to the host destination
// (a same-host server's arena, registered with CUDA once: HostRegistry) or into the staging itself (for
// the transport), and sums back. Each copy runs on a non-blocking stream of a small per-device pool, one
// pool each way, with an event recorded after it that its wait polls (up to a timeout). Every call uses the
// CUDA API and may block (the unregistered path waits, and so do ToHost, FromHost and a started copy's
// wait): never call one from CUDA's host-callback thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "cc/common/status.h"
#include "cc/ps/data_mover.h"

namespace bps {
namespace cuda {

// Copy streams per device and direction, reused. A stream goes back as soon as its copies are queued, so
// that the next copy the same way queues behind them on it: one stream each way per device, as long as
// copies start on one thread each way; the two ways never share one, so sums need not wait behind pushes.
class CopyStreams {
 public:
  CopyStreams() = default;
  CopyStreams(const CopyStreams&) = delete;
  CopyStreams& operator=(const CopyStreams&) = delete;
  ~CopyStreams();

  StatusOr<cudaStream_t> Take(int device, bool to_host);
  void Give(int device, bool to_host, cudaStream_t stream);
  // A copy on `stream` timed out, so the GPU may never get past it: it is not handed out again (once given
  // back, if it is out now).
  void Retire(cudaStream_t stream);

 private:
  std::mutex mu_;
  std::map<std::pair<int, bool>, std::vector<cudaStream_t>> idle_;  // by device and direction
  std::set<cudaStream_t> retired_;
  std::vector<std::pair<int, cudaStream_t>> all_;
};

// A contiguous run of the tensor on one GPU: elements [offset, offset + count) of the tensor are at `data`.
struct DeviceRun {
  int device;
  char* data;
  uint64_t offset;
  uint64_t count;
};

class GpuDataMover : public DataMover {
 public:
  // `staging` (pinned) stands for the tensor: element i of the tensor at staging + i * element, for the
  // elements of `runs` (disjoint). A copy not done within `timeout_s` (BYTEPS_TIMEOUT) fails.
  GpuDataMover(std::shared_ptr<CopyStreams> streams, char* staging, size_t element, std::vector<DeviceRun> runs,
               double timeout_s);

  Status ToHost(const void* staged, void* host, size_t bytes) override { return StartToHost(staged, host, bytes)(); }
  Status FromHost(void* staged, const void* host, size_t bytes) override {
    return StartFromHost(staged, host, bytes)();
  }
  InFlight StartToHost(const void* staged, void* host, size_t bytes) override;
  InFlight StartFromHost(void* staged, const void* host, size_t bytes) override;

 private:
  // Starts the copies between the GPU memory [staged, staged + bytes) stands for and `host` (pinned or
  // registered), cut at `seams` (host addresses where one registration of the host range ends and the next
  // begins).
  InFlight Start(const char* staged, char* host, size_t bytes, bool to_host,
                 const std::vector<const char*>& seams = {});
  // Queues the copies of one run's elements [from, to) on `stream`; `host` stands for element `begin`.
  Status Queue(const DeviceRun& run, uint64_t from, uint64_t to, uint64_t begin, char* host, bool to_host,
               const std::vector<const char*>& seams, cudaStream_t stream);

  const std::shared_ptr<CopyStreams> streams_;
  char* const staging_;
  const size_t element_;
  const double timeout_s_;
  const std::vector<DeviceRun> runs_;  // by offset
};

}  // namespace cuda
}  // namespace bps

// NCCL among the GPUs of one machine: the local reduction before the servers and the local broadcast after.
// One process driving several GPUs (BytePSStrategy's mirrored replicas) holds one communicator per device;
// with one process per GPU (Horovod-style launch) each process holds one member of a communicator that
// spans the machine's processes. NCCL ranks are in GPU order in the first case, local ranks in the second.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <vector>

#include "cc/common/dtype.h"
#include "cc/common/status.h"

namespace bps {
namespace cuda {

ncclDataType_t NcclType(DataType dtype);

// One buffer of a collective: the device it is on, its data, the stream the operation runs on.
struct DeviceSpan {
  int device;
  void* data;
  cudaStream_t stream;
};

class LocalNccl {
 public:
  // Communicators for `devices`, all driven by this process.
  static StatusOr<std::unique_ptr<LocalNccl>> ForDevices(const std::vector<int>& devices);
  // This process's member (NCCL rank `rank` of `size`, on `device`) of a communicator whose other members
  // are other processes; `unique_id` is NCCL rank 0's NewUniqueId(). Blocks until every member joined.
  static StatusOr<std::unique_ptr<LocalNccl>> ForProcess(int device, int rank, int size, const std::string& unique_id);
  // A fresh communicator id (on the process that will be NCCL rank 0), as bytes to hand to the others.
  static StatusOr<std::string> NewUniqueId();
  ~LocalNccl();

  // Members of the communicator, in all processes.
  int size() const { return size_; }
  // The GPUs this process drives: NCCL ranks first_rank() .. first_rank() + devices().size() - 1.
  const std::vector<int>& devices() const { return devices_; }
  int first_rank() const { return first_rank_; }
  // Whether other processes hold members too (their calls must be issued in the same order as ours).
  bool spans_processes() const { return static_cast<int>(devices_.size()) < size_; }

  // Each call is one collective over all members; spans[i] is this process's member on devices()[i].
  // Calls are serialised: NCCL needs every member to see the same order of operations.
  Status Reduce(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count, int root);
  Status Broadcast(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count, int root);
  Status AllReduce(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count);
  // spans[i] holds count elements; NCCL rank r ends with the sum of slice r (count / size() elements, at
  // offset r * count / size()). count must be a multiple of size().
  Status ReduceScatter(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count);
  // The inverse: member i's slice i goes to every member.
  Status AllGather(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count);

 private:
  LocalNccl(std::vector<int> devices, std::vector<ncclComm_t> comms, int first_rank, int size)
      : devices_(std::move(devices)), comms_(std::move(comms)), first_rank_(first_rank), size_(size) {}
  template <typename Fn>
  Status Group(const std::vector<DeviceSpan>& spans, Fn issue);

  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  const int first_rank_;
  const int size_;
  std::mutex mu_;
};

}  // namespace cuda
}  // namespace bps

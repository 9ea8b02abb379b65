// NCCL among the GPUs of one machine: the local reduction before the servers and the local broadcast after.
// One process driving several GPUs (BytePSStrategy's mirrored replicas) gets one communicator per device.
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
  ~LocalNccl();

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<int>& devices() const { return devices_; }

  // Each call is one collective over all members (spans[i] on devices()[i]); issued as one NCCL group.
  // Calls are serialised: NCCL needs every member to see the same order of operations.
  Status Reduce(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count, int root);
  Status Broadcast(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count, int root);
  Status AllReduce(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count);
  // spans[i] holds count elements; member i ends with the sum of slice i (count / size() elements, at
  // offset i * count / size()). count must be a multiple of size().
  Status ReduceScatter(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count);
  // The inverse: member i's slice i goes to every member.
  Status AllGather(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count);

 private:
  LocalNccl(std::vector<int> devices, std::vector<ncclComm_t> comms)
      : devices_(std::move(devices)), comms_(std::move(comms)) {}
  template <typename Fn>
  Status Group(const std::vector<DeviceSpan>& spans, Fn issue);

  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::mutex mu_;
};

}  // namespace cuda
}  // namespace bps

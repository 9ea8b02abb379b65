#include "cc/cuda/local_nccl.h"

#include "cc/cuda/cuda_status.h"

#include <cstring>

namespace bps {
namespace cuda {

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
  }
  return ncclFloat32;
}

namespace {

// NCCL reports a GPU without room for its buffers as an "unhandled cuda error": say what it is. TensorFlow
// takes most of a GPU's memory at start unless told to grow, so processes sharing a GPU leave none.
Status WithMemoryHint(const Status& status, const std::vector<int>& devices) {
  constexpr size_t kEnoughForNccl = size_t{512} << 20;
  for (int device : devices) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) continue;
    if (free_bytes < kEnoughForNccl) {
      return Status(status.code(), status.message() + " (GPU " + std::to_string(device) + " has only " +
                                       std::to_string(free_bytes >> 20) + " MiB of " +
                                       std::to_string(total_bytes >> 20) +
                                       " MiB free; TensorFlow takes most of a GPU's memory unless "
                                       "TF_FORCE_GPU_ALLOW_GROWTH=true, which processes sharing a GPU need)");
    }
  }
  return status;
}

}  // namespace

StatusOr<std::unique_ptr<LocalNccl>> LocalNccl::ForDevices(const std::vector<int>& devices) {
  if (devices.empty()) return InvalidArgument("LocalNccl needs at least one device");
  const int size = static_cast<int>(devices.size());
  // One GPU reduces with nobody: no communicator (and none of the memory NCCL would take on it).
  if (size == 1) return std::unique_ptr<LocalNccl>(new LocalNccl(devices, {}, 0, 1));
  std::vector<ncclComm_t> comms(devices.size());
  Status created = NcclStatus(ncclCommInitAll(comms.data(), size, devices.data()), "ncclCommInitAll");
  if (!created.ok()) return WithMemoryHint(created, devices);
  return std::unique_ptr<LocalNccl>(new LocalNccl(devices, std::move(comms), 0, size));
}

StatusOr<std::string> LocalNccl::NewUniqueId() {
  ncclUniqueId id;
  BPS_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

StatusOr<std::unique_ptr<LocalNccl>> LocalNccl::ForProcess(int device, int rank, int size,
                                                          const std::string& unique_id) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id)) return InvalidArgument("malformed NCCL unique id from local rank 0");
  std::memcpy(&id, unique_id.data(), sizeof(id));
  BPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  std::vector<ncclComm_t> comms(1);
  Status joined = NcclStatus(ncclCommInitRank(&comms[0], size, id, rank), "ncclCommInitRank");
  if (!joined.ok()) return WithMemoryHint(joined, {device});
  return std::unique_ptr<LocalNccl>(new LocalNccl({device}, std::move(comms), rank, size));
}

LocalNccl::~LocalNccl() {
  for (ncclComm_t comm : comms_) ncclCommDestroy(comm);
}

template <typename Fn>
Status LocalNccl::Group(const std::vector<DeviceSpan>& spans, Fn issue) {
  // A lone GPU's collective (in place) leaves its buffer as it is.
  if (size_ == 1 && comms_.empty() && spans.size() == 1) return Status::OK();
  if (spans.size() != comms_.size()) {
    return InvalidArgument("a local collective needs one buffer per local GPU (" + std::to_string(comms_.size()) +
                           "), got " + std::to_string(spans.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  BPS_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  Status issued;
  for (size_t i = 0; i < spans.size() && issued.ok(); ++i) {
    issued = CudaStatus(cudaSetDevice(spans[i].device), "cudaSetDevice");
    if (issued.ok()) issued = NcclStatus(issue(static_cast<int>(i), spans[i], comms_[i]), "NCCL collective");
  }
  Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
  return issued.ok() ? ended : issued;
}

Status LocalNccl::Reduce(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count, int root) {
  return Group(spans, [&](int, const DeviceSpan& s, ncclComm_t comm) {
    return ncclReduce(s.data, s.data, count, NcclType(dtype), ncclSum, root, comm, s.stream);
  });
}

Status LocalNccl::Broadcast(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count, int root) {
  return Group(spans, [&](int, const DeviceSpan& s, ncclComm_t comm) {
    return ncclBroadcast(s.data, s.data, count, NcclType(dtype), root, comm, s.stream);
  });
}

Status LocalNccl::AllReduce(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count) {
  return Group(spans, [&](int, const DeviceSpan& s, ncclComm_t comm) {
    return ncclAllReduce(s.data, s.data, count, NcclType(dtype), ncclSum, comm, s.stream);
  });
}

Status LocalNccl::ReduceScatter(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count) {
  const size_t slice = count / size_;
  const size_t element = DataTypeSize(dtype);
  return Group(spans, [&](int i, const DeviceSpan& s, ncclComm_t comm) {
    // In place: NCCL rank r's result lands in its own slice of the buffer.
    char* base = static_cast<char*>(s.data);
    char* mine = base + (first_rank_ + i) * slice * element;
    return ncclReduceScatter(base, mine, slice, NcclType(dtype), ncclSum, comm, s.stream);
  });
}

Status LocalNccl::AllGather(const std::vector<DeviceSpan>& spans, DataType dtype, size_t count) {
  const size_t slice = count / size_;
  const size_t element = DataTypeSize(dtype);
  return Group(spans, [&](int i, const DeviceSpan& s, ncclComm_t comm) {
    char* base = static_cast<char*>(s.data);
    return ncclAllGather(base + (first_rank_ + i) * slice * element, base, slice, NcclType(dtype), comm, s.stream);
  });
}

}  // namespace cuda
}  // namespace bps

// GPU kernels of BytepsPushPull, BytepsBroadcast and BytepsGather. Ready event: our streams wait on TF's compute stream
// (an event recorded there); completion: TF's stream waits on ours. The host never blocks on the GPU.
#include <cuda_runtime.h>

#include "cc/cuda/process_gpu.h"
#include "cc/runtime/process_engine.h"
#include "cc/tf/adapters.h"
#include "cc/tf/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"

namespace bps {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;

namespace {

// TF's CUDA stream for this op, and its GPU.
bool TfStream(OpKernelContext* context, cudaStream_t* stream, int* device) {
  auto* device_context = context->op_device_context();
  if (device_context == nullptr || device_context->stream() == nullptr) return false;
  stream_executor::Stream* tf_stream = device_context->stream();
  *stream = static_cast<cudaStream_t>(tf_stream->platform_specific_handle().stream);
  *device = tf_stream->parent()->device_ordinal();
  return *stream != nullptr;
}

absl::Status FromCuda(cudaError_t error, const char* what) {
  return error == cudaSuccess ? absl::OkStatus() : absl::InternalError(std::string(what) + ": " + cudaGetErrorString(error));
}

// Allocates an output of `shape`, fills it on TF's stream (fill(output, input, stream)), then hands it to the
// GPU push_pull.
template <typename Fill>
void RunOnGpu(OpKernelContext* context, const std::string& name, int priority, int local_devices,
              const tensorflow::TensorShape& shape, Fill fill, AsyncOpKernel::DoneCallback done) {
  if (!ProcessEngine()) {
    context->SetStatus(absl::FailedPreconditionError(
        "'" + name + "' ran before bps_tf.init(): call bps_tf.init() first, in a process started by bpslaunch"));
    return done();
  }
  DataType dtype;
  const tensorflow::Tensor& input = context->input(0);
  OP_REQUIRES_ASYNC(context, tf_adapter::ToCoreDtype(input.dtype(), &dtype),
                    absl::InvalidArgumentError("unsupported dtype for '" + name + "'"), done);
  cudaStream_t stream;
  int device;
  OP_REQUIRES_ASYNC(context, TfStream(context, &stream, &device),
                    absl::InternalError("no CUDA stream for '" + name + "'"), done);
  tensorflow::Tensor* output = nullptr;
  OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, shape, &output), done);
  OP_REQUIRES_OK_ASYNC(context, FromCuda(cudaSetDevice(device), "cudaSetDevice"), done);
  OP_REQUIRES_OK_ASYNC(context, FromCuda(fill(output, input, stream), "preparing the output"), done);
  cuda::GpuTensor member{device, output->data(), stream};
  cuda::ProcessGpuPushPull(name, dtype, static_cast<uint64_t>(output->NumElements()), priority, local_devices, member,
                           [context, done](const Status& status) {
                             context->SetStatus(tf_adapter::ToTfStatus(status));
                             done();
                           });
}

cudaError_t CopyInput(tensorflow::Tensor* output, const tensorflow::Tensor& input, cudaStream_t stream) {
  if (input.TotalBytes() == 0) return cudaSuccess;
  return cudaMemcpyAsync(output->data(), input.data(), input.TotalBytes(), cudaMemcpyDeviceToDevice, stream);
}

}  // namespace

class PushPullGpuOp : public AsyncOpKernel {
 public:
  explicit PushPullGpuOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("priority", &priority_));
    OP_REQUIRES_OK(context, context->GetAttr("shape_in_name", &shape_in_name_));
    OP_REQUIRES_OK(context, context->GetAttr("local_devices", &local_devices_));
    std::string op;
    std::vector<int> members;
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &op));
    OP_REQUIRES_OK(context, context->GetAttr("process_set", &members));
    // bps_tf's Python layer places such reductions on the CPU; the GPU path sums over every worker.
    std::string compression;
    OP_REQUIRES_OK(context, context->GetAttr("compression", &compression));
    OP_REQUIRES(context, op == "sum" && members.empty() && compression.empty(),
                absl::InvalidArgumentError("push_pull of '" + tensor_name_ + "' on a GPU sums over every worker; "
                                           "min, max, product, process sets and compression run on CPU tensors"));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const tensorflow::Tensor& input = context->input(0);
    std::string name = shape_in_name_ ? tensor_name_ + "/" + input.shape().DebugString() : tensor_name_;
    RunOnGpu(context, name, priority_, local_devices_, input.shape(), CopyInput, std::move(done));
  }

 private:
  std::string tensor_name_;
  int priority_ = 0;
  bool shape_in_name_ = false;
  int local_devices_ = 1;
};

// The root keeps its value, the others contribute zeros: the sum is the root's value on every worker.
class BroadcastGpuOp : public AsyncOpKernel {
 public:
  explicit BroadcastGpuOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
    std::vector<int> members;
    OP_REQUIRES_OK(context, context->GetAttr("process_set", &members));
    OP_REQUIRES(context, members.empty(),
                absl::InvalidArgumentError("broadcast of '" + tensor_name_ + "' on a GPU goes to every worker; "
                                           "process sets run on CPU tensors"));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::shared_ptr<Engine> engine = ProcessEngine();
    bool root = engine != nullptr && engine->rank() == root_rank_;
    OP_REQUIRES_ASYNC(context, engine == nullptr || (root_rank_ >= 0 && root_rank_ < engine->size()),
                      absl::InvalidArgumentError("broadcast of '" + tensor_name_ + "': root_rank " +
                                                 std::to_string(root_rank_) + " is out of range"),
                      done);
    auto fill = [root](tensorflow::Tensor* output, const tensorflow::Tensor& input, cudaStream_t stream) {
      if (root) return CopyInput(output, input, stream);
      return output->TotalBytes() ? cudaMemsetAsync(output->data(), 0, output->TotalBytes(), stream) : cudaSuccess;
    };
    RunOnGpu(context, "broadcast/" + tensor_name_, 0, 1, context->input(0).shape(), fill, std::move(done));
  }

 private:
  std::string tensor_name_;
  int root_rank_ = 0;
};

// Every worker's rows concatenated: this worker's rows at row `offset` of zeros of `total` rows, summed.
// Unlike the CPU kernel, the whole tensor crosses (the GPU path has no zero ranges); sparse gradients are
// gathered only when that is the smaller exchange anyway.
class GatherGpuOp : public AsyncOpKernel {
 public:
  explicit GatherGpuOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("priority", &priority_));
    std::vector<int> members;
    OP_REQUIRES_OK(context, context->GetAttr("process_set", &members));
    OP_REQUIRES(context, members.empty(),
                absl::InvalidArgumentError("gather of '" + tensor_name_ + "' on a GPU goes to every worker; "
                                           "process sets run on CPU tensors"));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const tensorflow::Tensor& rows = context->input(0);
    tensorflow::TensorShape shape;
    int64_t offset = 0;
    OP_REQUIRES_OK_ASYNC(
        context, GatherLayout(tensor_name_, rows, context->input(1), context->input(2), &shape, &offset), done);
    const int64_t count = rows.dim_size(0);
    const size_t row_bytes = count > 0 ? rows.TotalBytes() / count : 0;
    auto fill = [offset, row_bytes](tensorflow::Tensor* output, const tensorflow::Tensor& input, cudaStream_t stream) {
      if (output->TotalBytes() == 0) return cudaSuccess;
      cudaError_t error = cudaMemsetAsync(output->data(), 0, output->TotalBytes(), stream);
      if (error != cudaSuccess || input.TotalBytes() == 0) return error;
      return cudaMemcpyAsync(static_cast<char*>(output->data()) + offset * row_bytes, input.data(), input.TotalBytes(),
                             cudaMemcpyDeviceToDevice, stream);
    };
    // The total changes from step to step: it is part of the name, as every worker agrees on it.
    RunOnGpu(context, tensor_name_ + "/" + shape.DebugString(), priority_, 1, shape, fill, std::move(done));
  }

 private:
  std::string tensor_name_;
  int priority_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("BytepsPushPull").Device(tensorflow::DEVICE_GPU), PushPullGpuOp);
REGISTER_KERNEL_BUILDER(Name("BytepsBroadcast").Device(tensorflow::DEVICE_GPU), BroadcastGpuOp);
REGISTER_KERNEL_BUILDER(
    Name("BytepsGather").Device(tensorflow::DEVICE_GPU).HostMemory("offset").HostMemory("total"), GatherGpuOp);

}  // namespace bps

// Concatenation of every worker's rows through the parameter servers (sparse gradients, strategy.gather).
// A server sums, so this worker's rows are placed at row `offset` of a zero tensor of `total` rows and the
// other workers fill the other rows. Only the partitions that hold this worker's rows carry bytes; the
// rest are pushed as zeros (headers only), so each worker sends its own rows, not the whole.
#include <cstring>

#include "cc/tf/kernel_util.h"

namespace bps {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;

class GatherOp : public AsyncOpKernel {
 public:
  explicit GatherOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("priority", &priority_));
    OP_REQUIRES_OK(context, ReadProcessSet(context, &members_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::shared_ptr<Engine> engine = EngineOrFail(context, "gather of '" + tensor_name_ + "'");
    if (engine == nullptr) return done();
    const tensorflow::Tensor& rows = context->input(0);
    tensorflow::TensorShape shape;
    int64_t offset = 0;
    OP_REQUIRES_OK_ASYNC(
        context, GatherLayout(tensor_name_, rows, context->input(1), context->input(2), &shape, &offset), done);
    const int64_t count = rows.dim_size(0);
    const int64_t total = shape.dim_size(0);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, shape, &output), done);
    const uint64_t row_elements = total > 0 ? output->NumElements() / total : 0;
    const size_t row_bytes = row_elements * tensorflow::DataTypeSize(rows.dtype());
    char* out = static_cast<char*>(output->data());
    if (total > 0) {
      std::memset(out, 0, offset * row_bytes);
      if (rows.TotalBytes() > 0) std::memcpy(out + offset * row_bytes, rows.data(), rows.TotalBytes());
      std::memset(out + (offset + count) * row_bytes, 0, (total - offset - count) * row_bytes);
    }
    if (!CheckMember(context, *engine, members_, "gather of '" + tensor_name_ + "'")) return done();
    // The total changes from step to step: it is part of the name, as every worker agrees on it.
    PushPullRequest request;
    request.name = tensor_name_ + "/" + shape.DebugString();
    request.priority = priority_;
    request.members = members_;
    request.nonzero_begin = offset * row_elements;
    request.nonzero_end = (offset + count) * row_elements;
    Enqueue(context, *engine, std::move(request), *output, output, std::move(done));
  }

 private:
  std::string tensor_name_;
  int priority_ = 0;
  std::vector<int32_t> members_;
};

REGISTER_KERNEL_BUILDER(Name("BytepsGather").Device(tensorflow::DEVICE_CPU).HostMemory("offset").HostMemory("total"),
                        GatherOp);

}  // namespace bps

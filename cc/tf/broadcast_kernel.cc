// Broadcast through the parameter servers: the root pushes its value and every other worker pushes
// zeros, so the sum is the root's value, exactly, on every worker.
#include <cstring>

#include "cc/tf/kernel_util.h"

namespace bps {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;

class BroadcastOp : public AsyncOpKernel {
 public:
  explicit BroadcastOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::shared_ptr<Engine> engine = EngineOrFail(context, "broadcast of '" + tensor_name_ + "'");
    if (engine == nullptr) return done();
    OP_REQUIRES_ASYNC(context, root_rank_ >= 0 && root_rank_ < engine->size(),
                      absl::InvalidArgumentError("broadcast of '" + tensor_name_ + "': root_rank " +
                                                 std::to_string(root_rank_) + " is not in [0, size=" +
                                                 std::to_string(engine->size()) + ")"),
                      done);
    const tensorflow::Tensor& input = context->input(0);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input.shape(), &output), done);
    if (input.TotalBytes() > 0) {
      if (engine->rank() == root_rank_) {
        std::memcpy(output->data(), input.data(), input.TotalBytes());
      } else {
        std::memset(output->data(), 0, output->TotalBytes());
      }
    }
    Enqueue(context, *engine, "broadcast/" + tensor_name_, 0, *output, output, std::move(done));
  }

 private:
  std::string tensor_name_;
  int root_rank_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("BytepsBroadcast").Device(tensorflow::DEVICE_CPU), BroadcastOp);

}  // namespace bps

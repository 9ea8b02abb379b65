// The CPU kernel of BytepsPushPull: the sum of a tensor across every worker, in place where TF allows.
#include "cc/tf/kernel_util.h"

namespace bps {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;

class PushPullOp : public AsyncOpKernel {
 public:
  explicit PushPullOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("priority", &priority_));
    OP_REQUIRES_OK(context, context->GetAttr("shape_in_name", &shape_in_name_));
    std::string op;
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &op));
    OP_REQUIRES(context, ParseReduceOp(op, &reduce_op_), absl::InvalidArgumentError("unknown reduce_op '" + op + "'"));
    OP_REQUIRES_OK(context, ReadProcessSet(context, &members_));
    OP_REQUIRES_OK(context, ReadCompression(context, &compression_));
    OP_REQUIRES_OK(context, context->GetAttr("backups", &backups_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::shared_ptr<Engine> engine = EngineOrFail(context, "push_pull of '" + tensor_name_ + "'");
    if (engine == nullptr) return done();
    const tensorflow::Tensor& input = context->input(0);
    tensorflow::Tensor* output = nullptr;
    // In place when TF lets us reuse the input; otherwise the input is pushed and the sum lands in the output.
    OP_REQUIRES_OK_ASYNC(context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output), done);
    if (!CheckMember(context, *engine, members_, "push_pull of '" + tensor_name_ + "'")) return done();
    PushPullRequest request;
    request.name = shape_in_name_ ? tensor_name_ + "/" + input.shape().DebugString() : tensor_name_;
    request.priority = priority_;
    request.op = reduce_op_;
    request.members = members_;
    request.compression = compression_;
    request.backups = backups_;
    Enqueue(context, *engine, std::move(request), input, output, std::move(done));
  }

 private:
  std::string tensor_name_;
  int priority_ = 0;
  bool shape_in_name_ = false;
  ReduceOp reduce_op_ = ReduceOp::kSum;
  std::vector<int32_t> members_;
  CompressionSpec compression_;
  bool backups_ = false;
};

REGISTER_KERNEL_BUILDER(Name("BytepsPushPull").Device(tensorflow::DEVICE_CPU), PushPullOp);

}  // namespace bps

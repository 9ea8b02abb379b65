#include "cc/tf/push_pull_kernel.h"

#include "cc/runtime/process_engine.h"
#include "cc/tf/adapters.h"

namespace bps {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;

Engine* EngineOrFail(OpKernelContext* context, const std::string& op_name) {
  Engine* engine = ProcessEngine();
  if (engine == nullptr) {
    context->SetStatus(absl::FailedPreconditionError(
        op_name + " ran before bps_tf.init(): call bps_tf.init() first, in a process started by bpslaunch"));
  }
  return engine;
}

void Enqueue(OpKernelContext* context, Engine* engine, const std::string& name, int priority,
             const tensorflow::Tensor& input, tensorflow::Tensor* output, AsyncOpKernel::DoneCallback done,
             uint64_t nonzero_begin, uint64_t nonzero_end) {
  DataType dtype;
  if (!tf_adapter::ToCoreDtype(output->dtype(), &dtype)) {
    context->SetStatus(absl::InvalidArgumentError("unsupported dtype for '" + name + "'"));
    return done();
  }
  PushPullRequest request;
  request.name = name;
  request.dtype = dtype;
  request.shape = tf_adapter::Shape(*output);
  request.input = input.data();
  request.output = output->data();
  request.priority = priority;
  request.nonzero_begin = nonzero_begin;
  request.nonzero_end = nonzero_end;
  request.done = [context, done](const Status& status) {
    context->SetStatus(tf_adapter::ToTfStatus(status));
    done();
  };
  engine->Enqueue(std::move(request));
}

class PushPullOp : public AsyncOpKernel {
 public:
  explicit PushPullOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("priority", &priority_));
    OP_REQUIRES_OK(context, context->GetAttr("shape_in_name", &shape_in_name_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Engine* engine = EngineOrFail(context, "push_pull of '" + tensor_name_ + "'");
    if (engine == nullptr) return done();
    const tensorflow::Tensor& input = context->input(0);
    tensorflow::Tensor* output = nullptr;
    // In place when TF lets us reuse the input; otherwise the input is pushed and the sum lands in the output.
    OP_REQUIRES_OK_ASYNC(context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output), done);
    std::string name = shape_in_name_ ? tensor_name_ + "/" + input.shape().DebugString() : tensor_name_;
    Enqueue(context, engine, name, priority_, input, output, std::move(done));
  }

 private:
  std::string tensor_name_;
  int priority_ = 0;
  bool shape_in_name_ = false;
};

REGISTER_KERNEL_BUILDER(Name("BytepsPushPull").Device(tensorflow::DEVICE_CPU), PushPullOp);

}  // namespace bps

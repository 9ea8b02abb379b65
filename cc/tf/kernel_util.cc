#include "cc/tf/kernel_util.h"

#include "cc/runtime/process_engine.h"
#include "cc/tf/adapters.h"

namespace bps {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelContext;

std::shared_ptr<Engine> EngineOrFail(OpKernelContext* context, const std::string& op_name) {
  std::shared_ptr<Engine> engine = ProcessEngine();
  if (engine == nullptr) {
    context->SetStatus(absl::FailedPreconditionError(
        op_name + " ran before bps_tf.init(): call bps_tf.init() first, in a process started by bpslaunch"));
  }
  return engine;
}

void Enqueue(OpKernelContext* context, Engine& engine, const std::string& name, int priority,
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
  engine.Enqueue(std::move(request));
}

}  // namespace bps

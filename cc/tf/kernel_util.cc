#include "cc/tf/kernel_util.h"

#include <algorithm>

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

void Enqueue(OpKernelContext* context, Engine& engine, PushPullRequest request, const tensorflow::Tensor& input,
             tensorflow::Tensor* output, AsyncOpKernel::DoneCallback done) {
  DataType dtype;
  if (!tf_adapter::ToCoreDtype(output->dtype(), &dtype)) {
    context->SetStatus(absl::InvalidArgumentError("unsupported dtype for '" + request.name + "'"));
    return done();
  }
  request.dtype = dtype;
  request.shape = tf_adapter::Shape(*output);
  request.input = input.data();
  request.output = output->data();
  request.done = [context, done](const Status& status) {
    context->SetStatus(tf_adapter::ToTfStatus(status));
    done();
  };
  engine.Enqueue(std::move(request));
}

absl::Status ReadProcessSet(tensorflow::OpKernelConstruction* context, std::vector<int32_t>* members) {
  std::vector<int> ranks;
  TF_RETURN_IF_ERROR(context->GetAttr("process_set", &ranks));
  members->assign(ranks.begin(), ranks.end());
  return absl::OkStatus();
}

bool CheckMember(OpKernelContext* context, const Engine& engine, const std::vector<int32_t>& members,
                 const std::string& what) {
  if (members.empty() || std::find(members.begin(), members.end(), engine.rank()) != members.end()) return true;
  context->SetStatus(absl::InvalidArgumentError(what + ": worker " + std::to_string(engine.rank()) +
                                                " is not in its process set"));
  return false;
}

}  // namespace bps

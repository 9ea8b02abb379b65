// Broadcast through the parameter servers: the root pushes its value and every other worker pushes
// zeros, so the sum is the root's value, exactly, on every worker.
#include <algorithm>
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
    OP_REQUIRES_OK(context, ReadProcessSet(context, &members_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::shared_ptr<Engine> engine = EngineOrFail(context, "broadcast of '" + tensor_name_ + "'");
    if (engine == nullptr) return done();
    const bool root_in_set = members_.empty() ? root_rank_ >= 0 && root_rank_ < engine->size()
                                              : std::count(members_.begin(), members_.end(), root_rank_) == 1;
    OP_REQUIRES_ASYNC(context, root_in_set,
                      absl::InvalidArgumentError("broadcast of '" + tensor_name_ + "': root_rank " +
                                                 std::to_string(root_rank_) + " is not in [0, size=" +
                                                 std::to_string(engine->size()) + ") or not in its process set"),
                      done);
    if (!CheckMember(context, *engine, members_, "broadcast of '" + tensor_name_ + "'")) return done();
    const tensorflow::Tensor& input = context->input(0);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input.shape(), &output), done);
    if (input.TotalBytes() > 0) {
      // Collectives that are local (elastic, before a sync) give every worker its own value.
      if (engine->rank() == root_rank_ || engine->local_collectives()) {
        std::memcpy(output->data(), input.data(), input.TotalBytes());
      } else {
        std::memset(output->data(), 0, output->TotalBytes());
      }
    }
    PushPullRequest request;
    request.name = "broadcast/" + tensor_name_;
    request.members = members_;
    Enqueue(context, *engine, std::move(request), *output, output, std::move(done));
  }

 private:
  std::string tensor_name_;
  int root_rank_ = 0;
  std::vector<int32_t> members_;
};

REGISTER_KERNEL_BUILDER(Name("BytepsBroadcast").Device(tensorflow::DEVICE_CPU), BroadcastOp);

// A value only the root must provide: the others fetch it when they ask, and nobody waits for a worker that
// never asks (a variable created on some workers only, say). Each name is published once per generation.
class PublishOp : public AsyncOpKernel {
 public:
  explicit PublishOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::shared_ptr<Engine> engine = EngineOrFail(context, "publication of '" + tensor_name_ + "'");
    if (engine == nullptr) return done();
    OP_REQUIRES_ASYNC(context, root_rank_ >= 0 && root_rank_ < engine->size(),
                      absl::InvalidArgumentError("publication of '" + tensor_name_ + "': root_rank " +
                                                 std::to_string(root_rank_) + " is out of range"),
                      done);
    const tensorflow::Tensor& input = context->input(0);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input.shape(), &output), done);
    if ((engine->rank() == root_rank_ || engine->local_collectives()) && input.TotalBytes() > 0) {
      std::memcpy(output->data(), input.data(), input.TotalBytes());
    }
    PushPullRequest request;
    request.name = "publish/" + tensor_name_;
    request.scope = TensorScope::kPublished;
    request.root = root_rank_;
    Enqueue(context, *engine, std::move(request), *output, output, std::move(done));
  }

 private:
  std::string tensor_name_;
  int root_rank_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("BytepsPublish").Device(tensorflow::DEVICE_CPU), PublishOp);

}  // namespace bps

// Ops that answer questions about the build and the job when a graph runs (not when it is built):
// BytepsBuildInfo (so that cuda_built() and nccl_built() answer truthfully, and bps_tf knows whether push_pull
// compiles under XLA) and BytepsWorkerInfo (rank_op,
// size_op, ... of the Horovod API).
#include "cc/tf/kernel_util.h"

namespace bps {

class BuildInfoOp : public tensorflow::OpKernel {
 public:
  explicit BuildInfoOp(tensorflow::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tensorflow::OpKernelContext* context) override {
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    std::string info;
#ifdef BPS_TF_CUDA
    info += " cuda nccl";
#endif
#ifdef BPS_TF_XLA
    info += " xla";
#endif
    output->scalar<tensorflow::tstring>()() = info.empty() ? info : info.substr(1);
  }
};

REGISTER_KERNEL_BUILDER(Name("BytepsBuildInfo").Device(tensorflow::DEVICE_CPU), BuildInfoOp);

class WorkerInfoOp : public tensorflow::OpKernel {
 public:
  explicit WorkerInfoOp(tensorflow::OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("field", &field_));
  }

  void Compute(tensorflow::OpKernelContext* context) override {
    std::shared_ptr<Engine> engine = EngineOrFail(context, field_ + "_op");
    if (engine == nullptr) return;
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    int value = field_ == "rank"         ? engine->rank()
                : field_ == "size"       ? engine->size()
                : field_ == "local_rank" ? engine->local_rank()
                                         : engine->local_size();
    output->scalar<int32_t>()() = value;
  }

 private:
  std::string field_;
};

REGISTER_KERNEL_BUILDER(Name("BytepsWorkerInfo").Device(tensorflow::DEVICE_CPU), WorkerInfoOp);

}  // namespace bps

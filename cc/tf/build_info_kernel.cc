// BytepsBuildInfo: what this op library was built with, so that bps_tf can answer cuda_built() and
// nccl_built() truthfully.
#include "tensorflow/core/framework/op_kernel.h"

namespace bps {

class BuildInfoOp : public tensorflow::OpKernel {
 public:
  explicit BuildInfoOp(tensorflow::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tensorflow::OpKernelContext* context) override {
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
#ifdef BPS_TF_CUDA
    output->scalar<tensorflow::tstring>()() = "cuda nccl";
#else
    output->scalar<tensorflow::tstring>()() = "";
#endif
  }
};

REGISTER_KERNEL_BUILDER(Name("BytepsBuildInfo").Device(tensorflow::DEVICE_CPU), BuildInfoOp);

}  // namespace bps

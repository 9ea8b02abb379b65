// BytepsPushPull inside computations compiled with XLA (tf.function(jit_compile=True), Keras's
// jit_compile): the op becomes a start and a done custom call around the rest of the computation
// (xla_custom_calls.h), so gradients travel while the backward pass goes on, as they do outside XLA.
#include <string>
#include <vector>

#include "cc/tf/xla_custom_calls.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace bps {
namespace {

// A string as an MLIR string literal: the custom calls' attributes are an MLIR dictionary.
std::string Quoted(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
      out += '\\';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Joined(const std::vector<int>& ranks) {
  std::string out;
  for (int rank : ranks) out += (out.empty() ? "" : ",") + std::to_string(rank);
  return out;
}

// "[2,3]", as TensorShape::DebugString() writes it.
std::string ShapeText(const xla::Shape& shape) {
  std::string out = "[";
  for (int64_t dim : shape.dimensions()) out += (out.size() > 1 ? "," : "") + std::to_string(dim);
  return out + "]";
}

using InPlace = std::vector<std::pair<xla::ShapeIndex, std::pair<int64_t, xla::ShapeIndex>>>;

// Each call's result is its first operand's buffer: the reduction happens in place.
const InPlace& ResultInFirstOperand() {
  static const InPlace* in_place = new InPlace{{xla::ShapeIndex{}, {0, xla::ShapeIndex{}}}};
  return *in_place;
}

xla::XlaOp Start(xla::XlaBuilder* builder, xla::XlaOp input, const xla::Shape& shape, const std::string& name,
                 int64_t priority, const std::string& op, const std::string& members, const std::string& compression) {
  const std::string attributes = "{name = " + Quoted(name) + ", priority = " + std::to_string(priority) +
                                 " : i64, op = " + Quoted(op) + ", members = " + Quoted(members) +
                                 ", compression = " + Quoted(compression) + "}";
  return xla::CustomCall(builder, kXlaPushPullStart, {input}, shape, attributes, /*has_side_effect=*/true,
                         ResultInFirstOperand(), /*literal=*/nullptr, xla::CustomCallSchedule::SCHEDULE_EARLIEST,
                         xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
}

// `after`: a value the done call must wait for (kXlaAfterAll's result for a batch).
xla::XlaOp Done(xla::XlaBuilder* builder, xla::XlaOp started, xla::XlaOp after, const xla::Shape& shape,
                const std::string& name) {
  return xla::CustomCall(builder, kXlaPushPullDone, {started, after}, shape, "{name = " + Quoted(name) + "}",
                         /*has_side_effect=*/true, ResultInFirstOperand(), /*literal=*/nullptr,
                         xla::CustomCallSchedule::SCHEDULE_LATEST, xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
}

class PushPullXlaOp : public tensorflow::XlaOpKernel {
 public:
  explicit PushPullXlaOp(tensorflow::OpKernelConstruction* context)
      : XlaOpKernel(context), on_gpu_(context->device_type() == tensorflow::DeviceType(tensorflow::DEVICE_GPU_XLA_JIT)) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("priority", &priority_));
    OP_REQUIRES_OK(context, context->GetAttr("shape_in_name", &shape_in_name_));
    OP_REQUIRES_OK(context, context->GetAttr("local_devices", &local_devices_));
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &reduce_op_));
    OP_REQUIRES_OK(context, context->GetAttr("process_set", &members_));
    OP_REQUIRES_OK(context, context->GetAttr("compression", &compression_));
  }

  void Compile(tensorflow::XlaOpKernelContext* context) override {
    const std::string what = "push_pull of '" + tensor_name_ + "' under XLA";
    OP_REQUIRES(context, local_devices_ == 1,
                absl::InvalidArgumentError(what + ": XLA compiles each replica on its own, so the local "
                                           "replicas cannot be reduced together; run one process per device"));
    OP_REQUIRES(context, !on_gpu_ || (reduce_op_ == "sum" && members_.empty() && compression_.empty()),
                absl::InvalidArgumentError(what + " on a GPU sums over every worker; min, max, product, "
                                           "process sets and compression run outside XLA (jit_compile=False)"));
    xla::XlaBuilder* builder = context->builder();
    xla::XlaOp input = context->Input(0);
    auto shape = builder->GetShape(input);
    OP_REQUIRES_OK(context, shape.status());
    // Shapes are static under XLA: the name with the shape is the one the kernel outside XLA would use.
    const std::string name = shape_in_name_ ? tensor_name_ + "/" + ShapeText(shape.value()) : tensor_name_;
    xla::XlaOp started = Start(builder, input, shape.value(), name, priority_, reduce_op_, Joined(members_),
                               compression_);
    context->SetOutput(0, Done(builder, started, xla::ConstantR0<int32_t>(builder, 0), shape.value(), name));
  }

 private:
  const bool on_gpu_;
  std::string tensor_name_;
  int priority_ = 0;
  bool shape_in_name_ = false;
  int local_devices_ = 1;
  std::string reduce_op_;
  std::vector<int> members_;
  std::string compression_;
};

REGISTER_XLA_OP(Name("BytepsPushPull"), PushPullXlaOp);

// A batch of sums (a step's gradients): every start before any done. XLA's schedulers order custom calls by
// their data, not their schedule hints (the CPU's ignores them, and so may the GPU's), and a done placed right
// after its start would wait out each tensor's round trip in turn; waiting for all starts keeps the batch in
// flight together while the rest of the step runs.
class PushPullGroupXlaOp : public tensorflow::XlaOpKernel {
 public:
  explicit PushPullGroupXlaOp(tensorflow::OpKernelConstruction* context) : XlaOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_names", &tensor_names_));
    OP_REQUIRES_OK(context, context->GetAttr("priorities", &priorities_));
  }

  void Compile(tensorflow::XlaOpKernelContext* context) override {
    const int count = context->num_inputs();
    OP_REQUIRES(context, static_cast<int>(tensor_names_.size()) == count && static_cast<int>(priorities_.size()) == count,
                absl::InvalidArgumentError("BytepsPushPullGroup needs a name and a priority per tensor"));
    xla::XlaBuilder* builder = context->builder();
    std::vector<xla::XlaOp> started;
    std::vector<xla::Shape> shapes;
    for (int i = 0; i < count; ++i) {
      auto shape = builder->GetShape(context->Input(i));
      OP_REQUIRES_OK(context, shape.status());
      shapes.push_back(shape.value());
      started.push_back(Start(builder, context->Input(i), shapes.back(), tensor_names_[i], priorities_[i], "sum", "", ""));
    }
    xla::XlaOp all_started = xla::CustomCall(builder, kXlaAfterAll, started, xla::ShapeUtil::MakeShape(xla::S32, {}),
                                             "{}", /*has_side_effect=*/true, {}, /*literal=*/nullptr,
                                             xla::CustomCallSchedule::SCHEDULE_NONE,
                                             xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
    for (int i = 0; i < count; ++i) {
      context->SetOutput(i, Done(builder, started[i], all_started, shapes[i], tensor_names_[i]));
    }
  }

 private:
  std::vector<std::string> tensor_names_;
  std::vector<int> priorities_;
};

REGISTER_XLA_OP(Name("BytepsPushPullGroup"), PushPullGroupXlaOp);

}  // namespace
}  // namespace bps

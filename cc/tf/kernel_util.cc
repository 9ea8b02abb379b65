#include "cc/tf/kernel_util.h"

#include <utility>
#include <vector>

#include "cc/common/kept_after_failure.h"
#include "cc/common/process_set.h"
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
  request.in_place = std::make_shared<std::atomic<bool>>(false);
  request.done = [context, done, in_place = request.in_place, kept_input = input,
                  kept_output = *output](const Status& status) {
    if (!status.ok() && in_place->load()) KeepAfterFailure(kept_input, kept_output);
    context->SetStatus(tf_adapter::ToTfStatus(status));
    done();
  };
  engine.Enqueue(std::move(request));
}

void KeepAfterFailure(const tensorflow::Tensor& input, const tensorflow::Tensor& output) {
  const bool shared = input.data() == output.data();  // TensorFlow forwarded the input as the output
  const uint64_t bytes = input.TotalBytes() + (shared ? 0 : output.TotalBytes());
  KeptAfterFailure::OfProcess().Keep(std::make_shared<std::pair<tensorflow::Tensor, tensorflow::Tensor>>(input, output),
                                     bytes);
}

absl::Status ReadProcessSet(tensorflow::OpKernelConstruction* context, std::vector<int32_t>* members) {
  std::vector<int> ranks;
  TF_RETURN_IF_ERROR(context->GetAttr("process_set", &ranks));
  members->assign(ranks.begin(), ranks.end());
  return absl::OkStatus();
}

absl::Status ReadCompression(tensorflow::OpKernelConstruction* context, CompressionSpec* compression) {
  std::string text;
  TF_RETURN_IF_ERROR(context->GetAttr("compression", &text));
  auto parsed = CompressionSpec::Parse(text);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  *compression = parsed.value();
  return absl::OkStatus();
}

bool CheckMember(OpKernelContext* context, const Engine& engine, const std::vector<int32_t>& members,
                 const std::string& what) {
  const Status member = CheckInProcessSet(members, engine.rank(), what);
  if (member.ok()) return true;
  context->SetStatus(absl::InvalidArgumentError(member.message()));
  return false;
}

absl::Status GatherLayout(const std::string& tensor_name, const tensorflow::Tensor& rows,
                          const tensorflow::Tensor& offset, const tensorflow::Tensor& total,
                          tensorflow::TensorShape* shape, int64_t* first_row) {
  if (rows.dims() < 1 || offset.dims() != 0 || total.dims() != 0) {
    return absl::InvalidArgumentError("gather of '" + tensor_name +
                                      "': rows need a first dimension; offset and total are scalars");
  }
  const int64_t count = rows.dim_size(0);
  const int64_t start = offset.scalar<int64_t>()();
  const int64_t rows_in_all = total.scalar<int64_t>()();
  if (start < 0 || count > rows_in_all - start) {
    return absl::InvalidArgumentError("gather of '" + tensor_name + "': rows [" + std::to_string(start) + ", " +
                                      std::to_string(start + count) + ") do not fit in " +
                                      std::to_string(rows_in_all) + " rows");
  }
  *shape = rows.shape();
  shape->set_dim(0, rows_in_all);
  *first_row = start;
  return absl::OkStatus();
}

}  // namespace bps

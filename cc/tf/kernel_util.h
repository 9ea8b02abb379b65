// What the CPU kernels share: finding the process's engine and handing a tensor to it, with `done`
// called from the completion callback.
#pragma once

#include <memory>
#include <string>

#include "cc/runtime/engine.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace bps {

// The process's engine, or nullptr with an error set on the context. Hold it only while enqueueing: the
// engine runs its callbacks on its own threads, which must never drop its last reference.
std::shared_ptr<Engine> EngineOrFail(tensorflow::OpKernelContext* context, const std::string& op_name);

// Reduces `input` across workers into `output` (the same shape and dtype; it may share `input`'s buffer) as
// `request` says (its name, priority, op, process set, scope, nonzero range; the rest is filled in here);
// calls done() when finished, with the core's status converted to a TF status. Its pushes may go in place
// (PushPullRequest::in_place): after a failure of one that did, the tensors are kept (KeepAfterFailure).
void Enqueue(tensorflow::OpKernelContext* context, Engine& engine, PushPullRequest request,
             const tensorflow::Tensor& input, tensorflow::Tensor* output,
             tensorflow::AsyncOpKernel::DoneCallback done);

// Keeps the buffers of a push_pull whose pushes went in place and failed until no server can write into
// them any more (KeptAfterFailure: the next generation of an elastic job formed with the same servers; in
// other cases for the life of the process): memory TensorFlow reused must never receive a late sum.
void KeepAfterFailure(const tensorflow::Tensor& input, const tensorflow::Tensor& output);

// BytepsGather's inputs checked (rows with a first dimension, scalar offset and total, the rows fitting at
// `offset` of `total` rows): the output's shape and this worker's first row, or the error to report.
absl::Status GatherLayout(const std::string& tensor_name, const tensorflow::Tensor& rows,
                          const tensorflow::Tensor& offset, const tensorflow::Tensor& total,
                          tensorflow::TensorShape* shape, int64_t* first_row);

// The attrs every collective op has: its process set (ascending ranks; empty: every worker).
absl::Status ReadProcessSet(tensorflow::OpKernelConstruction* context, std::vector<int32_t>* members);
// The `compression` attribute ("", "onebit", "topk:0.01", ...), parsed.
absl::Status ReadCompression(tensorflow::OpKernelConstruction* context, CompressionSpec* compression);
// Whether this worker may take part in a collective over `members`, else the error (on the context).
bool CheckMember(tensorflow::OpKernelContext* context, const Engine& engine, const std::vector<int32_t>& members,
                 const std::string& what);

}  // namespace bps

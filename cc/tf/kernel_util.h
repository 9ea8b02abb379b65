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

// Sums `input` across workers under `name` into `output` (the same shape and dtype; it may share
// `input`'s buffer); calls done() when finished, with the core's status converted to a TF status.
// Elements of `input` outside [nonzero_begin, nonzero_end) are zero (see PushPullRequest).
void Enqueue(tensorflow::OpKernelContext* context, Engine& engine, const std::string& name, int priority,
             const tensorflow::Tensor& input, tensorflow::Tensor* output,
             tensorflow::AsyncOpKernel::DoneCallback done, uint64_t nonzero_begin = 0,
             uint64_t nonzero_end = UINT64_MAX);

}  // namespace bps

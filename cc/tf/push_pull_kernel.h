// What the push_pull and broadcast kernels share: checking the engine and the input, and handing a
// tensor to the core with `done` called from the completion callback.
#pragma once

#include <string>

#include "cc/runtime/engine.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace bps {

// The process's engine, or nullptr with an error set on the context.
Engine* EngineOrFail(tensorflow::OpKernelContext* context, const std::string& op_name);

// Sums `output` (already filled with this worker's contribution) in place across workers under `name`;
// calls done() when finished, with the core's status converted to a TF status.
void EnqueueInPlace(tensorflow::OpKernelContext* context, Engine* engine, const std::string& name, int priority,
                    tensorflow::Tensor* output, tensorflow::AsyncOpKernel::DoneCallback done);

}  // namespace bps

// The names XLA knows bps_tf's custom calls by, shared by the lowering (xla_push_pull_kernel.cc) and the
// handlers (xla_host_calls.cc, xla_gpu_calls.cc). A push_pull is lowered into two calls so that the compiled
// computation goes on while the tensor travels:
//   start: reads the tensor (its buffer is also the call's result) and hands it to the engine; returns at once.
//          Attributes: name, priority, op ("sum", "min", "max", "product"), members ("0,2"; "" for every
//          worker) and compression (BYTEPS_COMPRESSION syntax; "" for none).
//   done:  takes start's result (the same buffer again) and returns once the reduction is in it.
//          Attribute: name.
// XLA schedules start as early and done as late as it can (the GPU scheduler honours both).
#pragma once

namespace bps {

inline constexpr char kXlaPushPullStart[] = "bps_tf_push_pull_start";
inline constexpr char kXlaPushPullDone[] = "bps_tf_push_pull_done";

}  // namespace bps

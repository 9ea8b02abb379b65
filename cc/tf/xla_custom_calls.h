// The names XLA knows bps_tf's custom calls by, shared by the lowering (xla_push_pull_kernel.cc) and the
// handlers (xla_host_calls.cc, xla_gpu_calls.cc). A push_pull is lowered into two calls so that the compiled
// computation goes on while the tensor travels:
//   start: reads the tensor (its buffer is also the call's result) and hands it to the engine; returns at once.
//          Attributes: name, priority, op ("sum", "min", "max", "product"), members ("0,2"; "" for every
//          worker) and compression (BYTEPS_COMPRESSION syntax; "" for none).
//   done:  takes start's result (the same buffer again) and a value it must wait for (an s32 scalar:
//          kXlaAfterAll's result in a batch), and returns once the reduction is in the buffer. Attribute: name.
//   after_all: takes a batch's start results and does nothing: its result orders every done after every start.
// XLA schedules start as early and done as late as it can (the GPU scheduler honours both).
#pragma once

namespace bps {

inline constexpr char kXlaPushPullStart[] = "bps_tf_push_pull_start";
inline constexpr char kXlaPushPullDone[] = "bps_tf_push_pull_done";
inline constexpr char kXlaAfterAll[] = "bps_tf_after_all";

}  // namespace bps

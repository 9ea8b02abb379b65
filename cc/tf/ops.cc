// Op registrations.
// All are stateful: each call communicates, so TensorFlow must neither fold one with a constant input into a
// constant (it would run once, at graph optimisation, while other workers run theirs every step) nor merge
// two identical ones. bps_tf/tensorflow/ops.py keeps tf.function from also ordering them one after another.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"

namespace bps {

REGISTER_OP("BytepsPushPull")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("tensor_name: string")
    .Attr("priority: int = 0")
    .Attr("shape_in_name: bool = false")
    .Attr("local_devices: int = 1")
    .Attr("reduce_op: {'sum', 'min', 'max', 'product', 'weights'} = 'sum'")
    .Attr("process_set: list(int) = []")
    .Attr("compression: string = ''")
    .Attr("backups: bool = false")
    .Input("tensor: T")
    .Output("sum: T")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("Sum of `tensor` across all workers, through the parameter servers. `tensor_name` identifies the "
         "tensor on every worker; with `shape_in_name` the runtime shape is part of the name, for tensors "
         "whose shape changes between steps (every worker must still agree on it at each step). On GPUs, "
         "`local_devices` replicas of the tensor in this process (one per GPU) are reduced together. "
         "`reduce_op` min, max and product run on CPU tensors; `process_set` (ascending ranks) limits the "
         "reduction to those workers. `backups`: a gradient, whose rounds may complete without the job's "
         "backup workers (BYTEPS_BACKUP_WORKERS).");

REGISTER_OP("BytepsPushPullGroup")
    .Attr("T: list({half, bfloat16, float, double, int32, int64})")
    .Attr("tensor_names: list(string)")
    .Attr("priorities: list(int)")
    .Input("tensors: T")
    .Output("sums: T")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    })
    .Doc("Sums of `tensors` across all workers, each under its name and priority, inside a computation compiled "
         "by XLA only (it has no kernel outside XLA): all of them start before any is waited for.");

REGISTER_OP("BytepsGather")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("tensor_name: string")
    .Attr("priority: int = 0")
    .Attr("process_set: list(int) = []")
    .Input("rows: T")
    .Input("offset: int64")
    .Input("total: int64")
    .Output("gathered: T")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle rows;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &rows));
      tensorflow::shape_inference::ShapeHandle out;
      TF_RETURN_IF_ERROR(c->ReplaceDim(rows, 0, c->UnknownDim(), &out));
      c->set_output(0, out);
      return absl::OkStatus();
    })
    .Doc("Every worker's `rows` concatenated along the first dimension in rank order: this worker's start at "
         "row `offset` of `total` (every worker passes the same total). Each worker sends only its own rows.");

REGISTER_OP("BytepsBroadcast")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("tensor_name: string")
    .Attr("root_rank: int")
    .Attr("process_set: list(int) = []")
    .Input("tensor: T")
    .Output("value: T")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("The value of `tensor` on worker `root_rank`, on every worker (of `process_set`, if given).");

REGISTER_OP("BytepsPublish")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("tensor_name: string")
    .Attr("root_rank: int")
    .Input("tensor: T")
    .Output("value: T")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("The value of `tensor` on worker `root_rank`: the root publishes it, every other worker that runs this "
         "op fetches it; no worker waits for one that does not run it. Once per name and generation.");

REGISTER_OP("BytepsWorkerInfo")
    .Attr("field: {'rank', 'size', 'local_rank', 'local_size'}")
    .Output("value: int32")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc("This worker's rank, the number of workers, its local rank or its machine's number of workers, read "
         "when the op runs.");

REGISTER_OP("BytepsBuildInfo")
    .Output("info: string")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc("What this op library was built with, as words: 'cuda nccl' in a CUDA build, 'xla' where push_pull "
         "compiles under XLA.");

}  // namespace bps

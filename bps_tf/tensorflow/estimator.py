"""Helpers for tf.estimator jobs (TensorFlow 2.15 and earlier, with tensorflow-estimator), beside Horovod's
DistributedOptimizer and BroadcastGlobalVariablesHook, which estimators use unchanged.

An Estimator writes checkpoints and summaries to its model_dir and evaluates by restoring the latest
checkpoint from there. worker_model_dir() lets worker 0 alone write the job's model_dir while every worker
keeps the checkpoints its own evaluation restores; global_metrics() makes evaluation metrics those of every
worker's evaluation data together.
"""

import atexit
import shutil
import tempfile

import tensorflow as tf

from bps_tf.ops import Average, push_pull
from bps_tf.process import rank


def worker_model_dir(model_dir):
    """`model_dir` on worker 0; on the others a scratch directory of this process, removed when it exits.

    Pass it as the Estimator's model_dir (or RunConfig's). Every worker trains the same variables (the
    broadcast hook and the averaged gradients keep them equal), so worker 0's checkpoints are the job's.
    """
    if rank() == 0:
        return model_dir
    scratch = tempfile.mkdtemp(prefix=f"bps_tf_estimator_worker{rank()}_")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return scratch


def global_metrics(eval_metric_ops):
    """`eval_metric_ops` (name -> (value, update_op), as a model_fn returns them) with each value averaged
    over the workers when evaluation ends: with the evaluation data sharded evenly by rank, the metrics of
    the whole set, the same on every worker.

    Every worker must evaluate at the same points: call evaluate() on all of them, and with
    train_and_evaluate save checkpoints by steps (RunConfig(save_checkpoints_steps=...)) and evaluate at
    every one (EvalSpec(throttle_secs=0)), since time-based triggers differ between workers.
    """
    averaged = {}
    for name in sorted(eval_metric_ops):
        value, update_op = eval_metric_ops[name]
        value = tf.convert_to_tensor(value)
        dtype = value.dtype if value.dtype.is_floating else tf.float64
        summed = push_pull(tf.cast(value, dtype), name=f"estimator.metric.{name}", op=Average)
        averaged[name] = (tf.cast(summed, value.dtype) if dtype != value.dtype else summed, update_op)
    return averaged

"""One worker of the end-to-end benchmark: Keras (tf-keras) `fit` of a model on synthetic data under
  bps:   BytePSStrategy (gradients through bps_tf's parameter servers),
  mwms:  MultiWorkerMirroredStrategy with RING collectives (TF_CONFIG from --tf-cluster),
  local: no strategy and no communication at all (the same per-worker batch): the step time that
         communication adds to.
  lockstep: as local, but the workers form a bps_tf job and meet at a barrier after every step: the step
         time of synchronous training that moves no gradients (compute plus the wait for the slowest worker).
TensorFlow gets one intra-op and one inter-op thread, so that workers sharing the machine's cores each get a
fair, fixed share. Rank 0 (or each local process) writes its timings as JSON.
"""

import argparse
import json
import os
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", choices=["bps", "mwms", "local", "lockstep"], required=True)
    parser.add_argument("--model", choices=["bert", "mlp", "mlp-small"], required=True)
    parser.add_argument("--batch-per-worker", type=int, required=True)
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (tracing, first exchange)")
    parser.add_argument("--workers", type=int, default=1, help="workers of the job (local: only for the JSON)")
    parser.add_argument("--tf-cluster", help="mwms: host:port of each worker's TF server")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-priority", action="store_true",
                        help="bps: every gradient with priority 0 (bps_tf otherwise sends layers nearer the input first)")
    parser.add_argument("--sparse-as-dense", action="store_true",
                        help="bps: densify sparse gradients (bps_tf otherwise gathers an embedding's rows)")
    parser.add_argument("--output", required=True)
    return parser.parse_args()


def send_without_priority():
    """--no-priority: BytePSStrategy sends every gradient with priority 0.

    bps_tf has no switch for this (BytePSCrossDeviceOps always gives layers nearer the input a higher
    priority), so the benchmark replaces the push_pull that module calls with one that drops the priority.
    The core then orders partitions by key alone, i.e. by the hash of their names: an arbitrary but fixed
    order.
    """
    from bps_tf.ops import collectives, gather
    from bps_tf.strategy import cross_device_ops

    def push_pull_without_priority(*args, priority=0, **kwargs):
        return collectives.push_pull(*args, priority=0, **kwargs)

    gather_rows = gather._gather_rows

    def gather_rows_without_priority(rows, before, total, name, priority, *rest):
        return gather_rows(rows, before, total, name, 0, *rest)

    cross_device_ops.push_pull = gather.push_pull = push_pull_without_priority
    gather._gather_rows = gather_rows_without_priority


def make_strategy(args):
    import tensorflow as tf

    if args.strategy == "mwms":
        from benchmarks.lib import tf_ring

        return tf_ring.ring_strategy(args.tf_cluster.split(","), int(os.environ["DMLC_WORKER_ID"]))
    if args.strategy == "bps":
        if args.no_priority:
            send_without_priority()
        if args.sparse_as_dense:
            from bps_tf.strategy import cross_device_ops

            cross_device_ops._stays_sparse = lambda local_values: False
        from bps_tf.strategy import BytePSStrategy

        return BytePSStrategy()
    if args.strategy == "lockstep":
        import bps_tf.numpy

        bps_tf.numpy.init()
    return tf.distribute.get_strategy()  # the default: no distribution


def link_counters():
    """(received, sent) bytes of this host's link (eth0 of the network namespace), or None outside one."""
    with open("/proc/self/net/dev") as dev:
        for line in dev:
            if line.strip().startswith("eth0:"):
                fields = line.split(":", 1)[1].split()
                return int(fields[0]), int(fields[8])
    return None


class StepTimes:
    """Wall-clock time and the link's byte counters at the end of each training batch (Keras callback)."""

    def __init__(self, lockstep=False):
        import tensorflow as tf

        barrier = None
        if lockstep:
            import bps_tf.numpy

            barrier = bps_tf.numpy.barrier

        times = self.times = []
        counters = self.counters = []

        class Callback(tf.keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if barrier:
                    barrier()
                times.append(time.perf_counter())
                counters.append(link_counters())

        self.callback = Callback()

    def bytes_per_step(self, first):
        """(received, sent) per step from batch `first` on, or (0, 0) without a link."""
        start, end = self.counters[first], self.counters[-1]
        steps = len(self.counters) - 1 - first
        if start is None or steps <= 0:
            return 0, 0
        return (end[0] - start[0]) / steps, (end[1] - start[1]) / steps


def main():
    args = parse_args()
    import tensorflow as tf

    # Both settings, and MWMS's collectives, must be configured before TensorFlow runs anything.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    strategy = make_strategy(args)
    from benchmarks.lib import models

    workers = args.workers if args.strategy in ("bps", "mwms") else 1
    global_batch = args.batch_per_worker * workers
    x, y = models.synthetic_data(args.model, global_batch * 4)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(global_batch, drop_remainder=True)
    data = data.with_options(options)
    with strategy.scope():
        model = models.build(args.model)
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-4),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = StepTimes(lockstep=args.strategy == "lockstep")
    model.fit(data, epochs=1, steps_per_epoch=args.warmup + args.steps, callbacks=[timer.callback], verbose=0)
    steps = timer.times[args.warmup - 1:]
    step_s = [b - a for a, b in zip(steps, steps[1:])]
    rank = int(os.environ.get("DMLC_WORKER_ID", "0"))
    if rank == 0 or args.strategy == "local":
        gradient_bytes = sum(int(tf.size(v)) * v.dtype.size for v in model.trainable_variables)
        result = {"strategy": args.strategy, "model": args.model, "workers": args.workers,
                  "batch_per_worker": args.batch_per_worker, "global_batch": args.batch_per_worker * args.workers,
                  "gradient_bytes": gradient_bytes, "step_s": step_s,
                  "gradient_tensor_bytes": [int(tf.size(v)) * v.dtype.size for v in model.trainable_variables],
                  "no_priority": args.no_priority,
                  "sparse_as_dense": args.sparse_as_dense}
        result["received_bytes_per_step"], result["sent_bytes_per_step"] = timer.bytes_per_step(args.warmup - 1)
        with open(args.output, "w") as out:
            json.dump(result, out)


if __name__ == "__main__":
    main()

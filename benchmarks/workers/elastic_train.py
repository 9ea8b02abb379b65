"""One worker of the elastic recovery benchmark (benchmarks/elastic_recovery.py): Keras 3 `fit` with the
Horovod API (DistributedOptimizer, each worker its own batch of synthetic data) inside
`bps_tf.keras.elastic.run`, in two phases that one elastic function runs in turn, so that a worker that joins
later (it is given the state of rank 0) goes straight to the phase the others are in:

1. commit costs: segments of --segment-steps steps, each with one setting of --commit-settings ("none":
   no elastic callback at all; N: UpdateBatchStateCallback, UpdateEpochStateCallback and
   CommitStateCallback(state, batches_per_commit=N)), --rounds times, the order rotated every round;
2. recovery: one long epoch committing every --batches-per-commit batches, until the benchmark asks the
   workers to stop (it creates LOG_DIR/stop; every --stop-check batches the workers agree on it with a
   max push_pull, so that all stop at the same step). Meanwhile the benchmark kills workers and servers;
   bpslaunch starts them again and they rejoin.

Every process appends events to LOG_DIR/events.<worker id>.jsonl, one JSON object a line, with "t" (time.time,
the same clock in every process of the machine), "pid" and "event": start (before TensorFlow is imported),
ready (job joined, model compiled), reset (a new generation formed: the reset callback; "gen", "size",
"servers": the generation's servers, "rank"), begin (a fit starts), step (a batch done: "gen", "size",
"servers", "rank", "phase", "setting", "segment", "batch", "commit_s": time in the commit callback at that
batch, "push_pull_s": this process's wall time so far with a push_pull in flight), stopped.
"""

import time

STARTED = time.time()

import argparse  # noqa: E402
import faulthandler  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--model", default="mlp-small", help="a model of benchmarks/lib/models.py")
    parser.add_argument("--batch-per-worker", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.01, help="per worker (scaled by size())")
    parser.add_argument("--commit-settings", default="none,1,10,100")
    parser.add_argument("--segment-steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches-per-commit", type=int, default=1, help="in the recovery phase")
    parser.add_argument("--stop-check", type=int, default=10, help="batches between the stop agreements")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow's intra-op and inter-op threads")
    return parser.parse_args()


class EventLog:
    def __init__(self, path):
        self.path = path

    def write(self, event, **fields):
        with open(self.path, "a") as log:
            log.write(json.dumps({"event": event, "t": round(time.time(), 4), "pid": os.getpid(), **fields}) + "\n")


def main():
    faulthandler.register(signal.SIGUSR1)  # a stuck worker shows where it is
    args = parse_args()
    log_dir = Path(args.log_dir)
    worker_id = int(os.environ.get("DMLC_WORKER_ID", "0"))
    events = EventLog(log_dir / f"events.{worker_id}.jsonl")
    events.write("start", t=round(STARTED, 4))

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    import bps_tf.keras as hvd
    import bps_tf.numpy as bps_numpy
    from bps_tf._native import load_core
    from bps_tf.elastic.generations import servers

    from benchmarks.lib import models

    keras = tf.keras
    core = load_core()
    hvd.init()
    model = models.build(args.model)
    optimizer = keras.optimizers.SGD(args.learning_rate * hvd.size(), momentum=0.9)
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = models.synthetic_data(args.model, args.batch_per_worker * 8, seed=worker_id)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(args.batch_per_worker, drop_remainder=True)
    gradient_bytes = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
    events.write("ready", rank=hvd.rank(), size=hvd.size(), gradient_bytes=gradient_bytes)

    settings = args.commit_settings.split(",") if args.commit_settings else []
    plan = [settings[(i + r) % len(settings)] for r in range(args.rounds) for i in range(len(settings))]
    state = hvd.elastic.KerasState(model, batch=0, epoch=0, segment=0)
    where = {"phase": "commit", "setting": None}

    def on_state_reset():
        model.optimizer.learning_rate.assign(args.learning_rate * hvd.size())
        events.write("reset", gen=core.elastic_state()["generation"], size=hvd.size(), servers=servers(),
                     rank=hvd.rank())

    state.register_reset_callbacks([on_state_reset])

    class Mark(keras.callbacks.Callback):
        """Times what the callbacks between two marks take at the end of each batch."""

        def __init__(self, clock, ends):
            super().__init__()
            self.clock, self.ends = clock, ends

        def on_train_batch_end(self, batch, logs=None):
            if self.ends:
                self.clock["commit_s"] = time.perf_counter() - self.clock["from"]
            else:
                self.clock["from"] = time.perf_counter()

    class StepLog(keras.callbacks.Callback):
        def __init__(self, clock):
            super().__init__()
            self.clock = clock

        def on_train_begin(self, logs=None):
            events.write("begin", gen=core.elastic_state()["generation"], size=hvd.size(), rank=hvd.rank(),
                         phase=where["phase"])

        def on_train_batch_end(self, batch, logs=None):
            events.write("step", gen=core.elastic_state()["generation"], size=hvd.size(), servers=servers(),
                         rank=hvd.rank(), phase=where["phase"], setting=where["setting"], segment=int(state.segment),
                         batch=int(state.batch), commit_s=round(self.clock.get("commit_s", 0.0), 6),
                         push_pull_s=round(bps_numpy.communication_counters()["push_pull_seconds"], 6))

    class StopWhenAsked(keras.callbacks.Callback):
        """Every worker stops at the same batch, once any of them saw LOG_DIR/stop."""

        def on_train_batch_end(self, batch, logs=None):
            if state.batch % args.stop_check:
                return
            asked = np.array([int((log_dir / "stop").exists())], np.int32)
            if bps_numpy.push_pull(asked, "benchmark.stop", average=False, op="max")[0]:
                self.model.stop_training = True

    def elastic_callbacks(batches_per_commit, clock):
        return [hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
                Mark(clock, False), hvd.elastic.CommitStateCallback(state, batches_per_commit=batches_per_commit),
                Mark(clock, True)]

    @hvd.elastic.run
    def train(state):
        while state.segment < len(plan):
            setting = plan[state.segment]
            where.update(phase="commit", setting=setting)
            clock = {}
            callbacks = [] if setting == "none" else elastic_callbacks(int(setting), clock)
            model.fit(dataset, steps_per_epoch=args.segment_steps, epochs=1, callbacks=callbacks + [StepLog(clock)],
                      verbose=0)
            state.segment += 1
            state.batch = state.epoch = 0
            state.commit()
        where.update(phase="recovery", setting=str(args.batches_per_commit))
        clock = {}
        model.fit(dataset, steps_per_epoch=10**7, epochs=1 - state.epoch, verbose=0,
                  callbacks=elastic_callbacks(args.batches_per_commit, clock) + [StopWhenAsked(), StepLog(clock)])

    train(state)
    events.write("stopped", rank=hvd.rank(), size=hvd.size())
    hvd.shutdown()


if __name__ == "__main__":
    main()

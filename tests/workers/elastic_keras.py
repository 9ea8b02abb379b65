"""Keras `fit` in an elastic job, as bps_tf.keras.elastic's users write it: SGD with momentum and an accuracy
metric, a KerasState with batch and epoch, the three callbacks (a commit every batch), the learning rate
rescaled by a reset callback, and `fit` inside `elastic.run`. With the Horovod API (DistributedOptimizer, each
worker its own shuffle of the data) or under BytePSStrategy (one global batch that the strategy shards). The
test kills workers meanwhile.

Every worker logs each completed step to LOG_DIR/steps.<worker id> ("<time> <epoch> <batch> <size>"); at the
end each prints its weights' fingerprint, test accuracy and loss on the whole training set, and rank 0 also
those of the same training uninterrupted in one process (the same number of steps of the same global batch).

With HOLD (a fourth argument "hold"), a worker holds every report that it is ready for the next generation
until the file LOG_DIR/release exists: a survivor slow to report ready, as a tf-keras worker is while a
restarted one imports TensorFlow on the same cores.

With GLOBAL_BATCH (an argument "global_batch=N"), the strategy's global batch is N instead of 32 per first
worker: 32 over 4 workers is 8 each, over 3 workers 11, 11 and 10.

With AWAIT_REJOIN (an argument "await_rejoin"), a worker of a generation with fewer workers or servers than the
first does not start epoch 2 or later until it has heard that a worker or server waits to join: the restarted
one then always joins before the survivors could finish, however slowly it starts (a worker imports TensorFlow
on the same cores). With "await_rejoin_after_a_step" such a worker first takes one step: the survivors of a
kill step on at once, and then wait, so that the job trains the same few steps with fewer workers however
long the restarted one takes to start (with the Horovod API each worker's data and the learning rate follow
the number of workers, so that number of steps moves the final accuracy).

In asynchronous training (BYTEPS_ENABLE_ASYNC=1) the optimizer has no momentum, and once every worker is done
each takes one step at a zero learning rate, which pushes no change and gives it the servers' final weights.

Usage: elastic_keras.py hvd|strategy LOG_DIR [EPOCHS (20)] [hold] [global_batch=N] [await_rejoin]
[await_rejoin_after_a_step]. Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1."""

import faulthandler
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

import bps_tf.keras as hvd
from bps_tf import BytePSStrategy, process
from bps_tf.elastic.generations import servers, workers_waiting
from testing.digits import fingerprint, load, training_loss

keras = tf.keras
PER_WORKER_BATCH = 32
FIRST_WORKERS = 3
LEARNING_RATE = 0.2
# Each step also waits this long, so that a restarted worker (TensorFlow takes seconds to start) rejoins
# well before the end.
STEP_PAUSE_S = 0.05
# As in Horovod's examples, a compiled metric: tf-keras and Keras 3 build those at the first step, so a
# worker that joined builds them long after the others.
METRICS = ["accuracy"]


def build_model():
    keras.utils.set_random_seed(7)
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                             keras.layers.Dense(10, activation="softmax")])


def make_optimizer(learning_rate):
    """An optimizer with slots (momentum), as in Horovod's examples: built before the first sync and broadcast
    with the model. Asynchronous training takes plain SGD, so that a step at a zero learning rate changes
    nothing."""
    return keras.optimizers.SGD(learning_rate, momentum=0.0 if process.is_async() else 0.5)


def set_learning_rate(optimizer, value):
    variable = getattr(optimizer, "learning_rate", None)
    if hasattr(variable, "assign"):
        variable.assign(value)
    else:
        keras.backend.set_value(optimizer.learning_rate, value)


class StepLog(keras.callbacks.Callback):
    def __init__(self, path, state):
        super().__init__()
        self.path, self.state = path, state

    def on_train_batch_end(self, batch, logs=None):
        with open(self.path, "a") as log:
            log.write(f"{time.time():.3f} {self.state.epoch} {self.state.batch} {hvd.size()}\n")
        time.sleep(STEP_PAUSE_S)


def accuracy(model, x, y):
    return float(np.mean(np.argmax(np.asarray(model(x, training=False)), axis=1) == y))


def loss(model):
    """The loss on the whole training set."""
    return training_loss(lambda images: model(images, training=False))


def uninterrupted(x, y, global_batch, steps, epochs, learning_rate):
    """The same training in one process without any interruption: its model."""
    model = build_model()
    model.compile(optimizer=make_optimizer(learning_rate), loss="sparse_categorical_crossentropy",
                  metrics=METRICS)
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=3).repeat().batch(global_batch)
    model.fit(data, steps_per_epoch=steps, epochs=epochs, verbose=0)
    return model


def hold_ready_reports(release, timeout_s=120):
    """An elastic reset's init() (the report that this worker is ready for the next generation) waits until
    `release` exists."""
    join_next_generation = process.init

    def init():
        deadline = time.monotonic() + timeout_s
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        join_next_generation()

    process.init = init


class AwaitRejoin(keras.callbacks.Callback):
    """In a generation with fewer workers or servers than the first, from epoch 2 on, each batch waits (at most
    `timeout_s`) until this worker has heard that a worker or server waits to join; the next commit then takes
    it in."""

    def __init__(self, state, first_size, first_servers, free_steps=0, timeout_s=120):
        super().__init__()
        self.state, self.first_size, self.first_servers = state, first_size, first_servers
        self.free_steps, self.timeout_s = free_steps, timeout_s
        self.steps_without_all = 0  # steps begun since the job last had every worker and server

    def on_train_batch_begin(self, batch, logs=None):
        whole = hvd.size() >= self.first_size and servers() >= self.first_servers
        if whole:
            self.steps_without_all = 0
            return
        self.steps_without_all += 1
        if self.state.epoch < 2 or self.steps_without_all <= self.free_steps:
            return
        deadline = time.monotonic() + self.timeout_s
        while workers_waiting() == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no worker asked to join within {self.timeout_s} s")
            time.sleep(0.05)


def take_the_servers_weights(model, x, y):
    """Asynchronous training: after every worker's last push (a barrier), a step that changes nothing."""
    hvd.barrier()
    set_learning_rate(model.optimizer, 0.0)
    model.train_on_batch(x, y)


def main():
    faulthandler.register(signal.SIGUSR1)  # a stuck worker shows where it is
    api, log_dir = sys.argv[1], Path(sys.argv[2])
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    worker_id = os.environ["DMLC_WORKER_ID"]
    hvd.init()
    first_size, first_servers = hvd.size(), servers()
    options = sys.argv[4:]
    if "hold" in options:
        hold_ready_reports(log_dir / "release")
    x, y, x_test, y_test = load(0, 1)
    given = [int(o.split("=")[1]) for o in options if o.startswith("global_batch=")]
    global_batch = given[0] if given else PER_WORKER_BATCH * FIRST_WORKERS
    steps = len(x) // global_batch
    if api == "strategy":
        strategy = BytePSStrategy()
        with strategy.scope():
            model = build_model()
            # The global batch is the user's: the strategy divides it among the workers there are.
            model.compile(optimizer=make_optimizer(LEARNING_RATE), loss="sparse_categorical_crossentropy",
                          metrics=METRICS)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=3).repeat().batch(global_batch)
        steps_of = lambda: steps  # noqa: E731
    else:
        model = build_model()
        optimizer = hvd.DistributedOptimizer(make_optimizer(LEARNING_RATE * hvd.size() / FIRST_WORKERS))
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=METRICS)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=int(worker_id)).repeat() \
            .batch(PER_WORKER_BATCH)
        # As in Horovod's examples: each worker its own batch; an epoch covers the data once.
        steps_of = lambda: len(x) // (PER_WORKER_BATCH * hvd.size())  # noqa: E731

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    def on_state_reset():
        if api == "hvd":
            set_learning_rate(model.optimizer, LEARNING_RATE * hvd.size() / FIRST_WORKERS)

    state.register_reset_callbacks([on_state_reset])
    # A step is logged before its commit, which may end the generation to take a waiting worker in.
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
                 StepLog(log_dir / f"steps.{worker_id}", state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=1)]
    if "await_rejoin" in options:
        callbacks.insert(0, AwaitRejoin(state, first_size, first_servers))
    if "await_rejoin_after_a_step" in options:
        callbacks.insert(0, AwaitRejoin(state, first_size, first_servers, free_steps=1))

    @hvd.elastic.run
    def train(state):
        # Under the strategy the global batches are the reference's: after a reset they go on from the epoch's
        # place in the stream (a new iterator would start again from the first epoch's order).
        data = dataset.skip(state.epoch * steps) if api == "strategy" else dataset
        model.fit(data, steps_per_epoch=steps_of(), epochs=epochs - state.epoch, callbacks=callbacks, verbose=0)

    train(state)
    if process.is_async():
        take_the_servers_weights(model, x[:global_batch], y[:global_batch])
    rank = hvd.rank()
    print(f"rank {rank}: weights {fingerprint(model.get_weights())} accuracy {accuracy(model, x_test, y_test):.4f} "
          f"epochs {state.epoch} size {hvd.size()} loss {loss(model):.4f}", flush=True)
    if rank == 0:
        reference = uninterrupted(x, y, global_batch, steps, epochs, LEARNING_RATE)
        print(f"rank 0: uninterrupted accuracy {accuracy(reference, x_test, y_test):.4f} "
              f"loss {loss(reference):.4f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()

"""A custom training loop under BytePSStrategy in an elastic job: `strategy.run` over a distributed dataset
inside bps_tf.tensorflow.elastic.run, with TensorFlowKerasState(model, optimizer, batch=0, epoch=0) committed
every COMMIT_EVERY batches and at the end of every epoch. The dataset gives global batches; after a change of
workers the function distributes it again (the strategy shards it for the workers there are) and skips the
batches of the epoch already done.

Each replica scales its loss by the replica count (tf.nn.compute_average_loss: the global batch is the
per-replica batch x num_replicas_in_sync). The train step also returns the count it was traced with and the
mean of the per-replica mean losses (a MEAN, which the strategy divides by the replicas there are when it
runs): equal to the sum of the scaled losses only if the scale follows the job. A step where either
disagrees with the job prints "WRONG SCALE". Each reset prints the job's size and the strategy's
num_replicas_in_sync.

Every worker logs each step to LOG_DIR/steps.<worker id> ("<time> <epoch> <batch> <replicas> <size>"), a
worker started again waits until the others went on without it (testing.elastic_steps), and at the end each
prints its weights' fingerprint.

Usage: elastic_strategy_loop.py LOG_DIR. Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1."""

import faulthandler
import signal
import sys

import tensorflow as tf

import bps_tf.tensorflow as hvd
from bps_tf import BytePSStrategy
from testing.digits import fingerprint, load
from testing.elastic_steps import log_step, wait_until_the_others_went_on

keras = tf.keras
GLOBAL_BATCH = 48  # 16 per worker with 3 workers, 24 with 2
STEPS_PER_EPOCH = 20
EPOCHS = 4
COMMIT_EVERY = 2


def main():
    log_dir = sys.argv[1]
    faulthandler.register(signal.SIGUSR1)  # a stuck worker shows where it is
    wait_until_the_others_went_on(log_dir)
    strategy = BytePSStrategy()
    x, y, _, _ = load(0, 1)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=3).repeat() \
        .batch(GLOBAL_BATCH, drop_remainder=True)

    with strategy.scope():
        keras.utils.set_random_seed(hvd.rank())  # rank 0's weights reach every worker at the first sync
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10)])
        optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def train_step(inputs):
        def step(features, labels):
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(features, training=True))
                loss = tf.nn.compute_average_loss(per_example)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss, tf.reduce_mean(per_example)

        losses, means = strategy.run(step, args=inputs)
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.MEAN, means, axis=None),
                strategy.num_replicas_in_sync)

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0)

    def on_state_reset():
        print(f"rank {hvd.rank()}: reset: size {hvd.size()} replicas in sync {strategy.num_replicas_in_sync}",
              flush=True)

    state.register_reset_callbacks([on_state_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < EPOCHS:
            batches = dataset.skip(state.epoch * STEPS_PER_EPOCH + state.batch).take(STEPS_PER_EPOCH - state.batch)
            for inputs in strategy.experimental_distribute_dataset(batches):
                loss, mean, replicas = train_step(inputs)
                state.batch += 1
                if int(replicas) != hvd.size() or abs(float(loss) - float(mean)) > 1e-4 * max(1.0, float(mean)):
                    print(f"rank {hvd.rank()}: WRONG SCALE: loss {float(loss)} against a mean of {float(mean)}, "
                          f"traced for {int(replicas)} replicas in a job of {hvd.size()}", flush=True)
                if state.batch % COMMIT_EVERY == 0:
                    state.commit()
                log_step(log_dir, state.epoch, state.batch, replicas)
            state.epoch += 1
            state.batch = 0
            state.commit()

    train(state)
    print(f"rank {hvd.rank()}: weights {fingerprint(model.get_weights())} epochs {state.epoch} size {hvd.size()} "
          f"replicas in sync {strategy.num_replicas_in_sync}", flush=True)


if __name__ == "__main__":
    main()

"""A custom training loop with DistributedGradientTape on scikit-learn's digits.

    bpslaunch --local --workers 2 --servers 1 -- python examples/gradient_tape.py
"""

import keras
import tensorflow as tf

import bps_tf as bps
from digits_data import fingerprint, load


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    x_train, y_train, x_test, y_test = load(rank, size)
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1000, seed=rank).batch(32)

    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10)])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.SGD(0.1 * size, momentum=0.9)
    # Everyone starts from worker 0's weights.
    bps.broadcast_variables(model.variables, root_rank=0)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = bps.DistributedGradientTape(tape)  # gradients averaged over all workers
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Every worker must take the same number of steps: use the smallest shard's count.
    steps = int(bps.push_pull(tf.constant(len(dataset)), name="steps", op=bps.Sum)) // size
    for epoch in range(8):
        losses = [train_step(x, y) for x, y in dataset.take(steps)]
        mean_loss = bps.push_pull(tf.reduce_mean(losses), name="epoch_loss")
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {float(mean_loss):.4f}")
    logits = model(x_test)
    accuracy = float(tf.reduce_mean(tf.cast(tf.argmax(logits, axis=1) == y_test, tf.float32)))
    print(f"worker {rank}: test accuracy {accuracy:.3f}, model fingerprint {fingerprint(model.get_weights())}")
    bps.shutdown()


if __name__ == "__main__":
    main()

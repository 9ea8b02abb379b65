"""Training throughput on synthetic data, in the manner of Horovod's tensorflow2_synthetic_benchmark.py:
Keras fit of ResNet-50 (images/s) or a BERT-base-sized encoder (tokens/s) under BytePSStrategy, one GPU per
worker process. Keras compiles each step with XLA where it would on one GPU (jit_compile="auto").

    bpslaunch --local --workers 1 --local-size 8 -- python examples/synthetic_benchmark.py --model resnet50
    bpslaunch --local --workers 2 --servers 2 -- python examples/synthetic_benchmark.py --mixed-precision

Every worker prints its rate per round; worker 0 prints the job's total.
"""

import argparse
import time

import numpy as np
import tensorflow as tf

BERT_BASE = dict(vocabulary=30522, length=128, width=768, heads=12, inner=3072, layers=12)


def resnet50(keras, image_size):
    return keras.applications.ResNet50(weights=None, input_shape=(image_size, image_size, 3), classes=1000)


def encoder(keras, vocabulary, length, width, heads, inner, layers):
    """A BERT-style encoder classifying a sequence from its first token (BERT-base: the defaults above)."""

    class Positions(keras.layers.Layer):
        def build(self, shape):
            self.table = self.add_weight(shape=(shape[1], shape[2]), initializer="random_normal", name="table")

        def call(self, x):
            return x + self.table

    tokens = keras.Input((length,), dtype="int32")
    x = Positions()(keras.layers.Embedding(vocabulary, width)(tokens))
    for _ in range(layers):
        attention = keras.layers.MultiHeadAttention(heads, width // heads)(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + attention)
        hidden = keras.layers.Dense(inner, activation="gelu")(x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + keras.layers.Dense(width)(hidden))
    return keras.Model(tokens, keras.layers.Dense(2, dtype="float32")(x[:, 0]))


def synthetic_batch(model_name, examples, image_size=224, vocabulary=30522, length=128):
    """(inputs, labels) of `examples` random examples for `model_name`."""
    rng = np.random.default_rng(0)
    if model_name == "resnet50":
        return rng.random((examples, image_size, image_size, 3), dtype=np.float32), rng.integers(0, 1000, examples)
    return rng.integers(0, vocabulary, (examples, length), dtype=np.int32), rng.integers(0, 2, examples)


class RoundTimer:
    """Seconds and steps of each epoch from its first step's end to its last's (the first step of an epoch
    also waits for the epoch to begin); each step's loss is read back, so its GPU work has finished."""

    def __init__(self, keras):
        timer = self
        self.rounds = []

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                float(logs["loss"])
                now = time.perf_counter()
                if batch == 0:
                    timer.started = now
                timer.last, timer.steps = now, batch

            def on_epoch_end(self, epoch, logs=None):
                timer.rounds.append((timer.last - timer.started, timer.steps))

        self.callback = Callback()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("resnet50", "bert"), default="resnet50")
    parser.add_argument("--batch-size", type=int, default=None, help="per GPU (default: 64 images, 32 sequences)")
    parser.add_argument("--mixed-precision", action="store_true", help="mixed_float16")
    parser.add_argument("--no-xla", action="store_true", help="jit_compile=False")
    parser.add_argument("--num-batches-per-iter", type=int, default=30)
    parser.add_argument("--num-iters", type=int, default=3, help="timed rounds, after one warm-up round")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--layers", type=int, default=BERT_BASE["layers"], help="encoder blocks")
    parser.add_argument("--width", type=int, default=BERT_BASE["width"], help="encoder width (heads: width / 64)")
    args = parser.parse_args()

    import keras

    import bps_tf
    from bps_tf.strategy import BytePSStrategy

    keras.mixed_precision.set_global_policy("mixed_float16" if args.mixed_precision else "float32")
    strategy = BytePSStrategy()
    per_gpu = args.batch_size or (64 if args.model == "resnet50" else 32)
    x, y = synthetic_batch(args.model, per_gpu * strategy.num_replicas_in_sync, image_size=args.image_size)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat().with_options(options)
    with strategy.scope():
        if args.model == "resnet50":
            model = resnet50(keras, args.image_size)
        else:
            model = encoder(keras, **dict(BERT_BASE, layers=args.layers, width=args.width,
                                          heads=max(1, args.width // 64), inner=4 * args.width))
        model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), jit_compile=False if args.no_xla else "auto",
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=args.model != "resnet50"))
    timer = RoundTimer(keras)
    model.fit(dataset, steps_per_epoch=args.num_batches_per_iter, epochs=1 + args.num_iters, verbose=0,
              callbacks=[timer.callback])
    unit, per_example = ("images/s", 1) if args.model == "resnet50" else ("tokens/s", x.shape[1])
    examples = per_gpu * strategy.num_replicas_in_sync * per_example
    rates = [steps * examples / seconds for seconds, steps in timer.rounds[1:]]
    rank, size = bps_tf.rank(), bps_tf.size()
    print(f"worker {rank}: {args.model}, XLA {'on' if model.jit_compile else 'off'}, "
          f"{' '.join(f'{r / size:.1f}' for r in rates)} {unit} per worker")
    if rank == 0:
        print(f"total: {np.mean(rates):.1f} +- {1.96 * np.std(rates):.1f} {unit} on {size} workers")
    bps_tf.shutdown()


if __name__ == "__main__":
    main()

"""Why one-bit compression needs more steps under Adam: one process trains the time-to-accuracy benchmark's
BERT-like encoder on digits with a hand-written Adam fed four ways, and counts the steps to the target.

- exact: Adam on the gradient;
- onebit: Adam on the gradient encoded as bps_tf's one-bit does (sign times the mean magnitude, per tensor of
  at least 64 KB, error feedback);
- onebit, exact second moment: Adam's first moment from the one-bit gradient, its second moment from the
  exact one. If this variant needs the exact steps again, what costs steps is the second moment that the
  one-bit magnitudes flatten, not the error of the encoding itself;
- onebit, a scale per 256 elements: the encoding with a mean magnitude per block of 256 elements instead
  of one per tensor (1.125 bits per element). If this one needs the exact steps again, what costs steps is
  one scale for a whole tensor.

python -m benchmarks.ablations.onebit_adam --output /tmp/onebit_adam.json
"""

import argparse
import json
import os
from pathlib import Path

import numpy as np

from benchmarks.lib.digits import build, inputs_for, load
from benchmarks.lib.train_runs import LEGACY_KERAS

# variant: (one-bit encoding?, elements per scale or None for one scale per tensor, second moment from the exact
# gradient?)
VARIANTS = {"exact": (False, None, False), "onebit": (True, None, False),
            "onebit, exact second moment": (True, None, True), "onebit, a scale per 256 elements": (True, 256, False)}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=128, help="the benchmark's global batch")
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--output")
    return parser.parse_args()


def onebit(tf, value, residual, block=None):
    """bps_tf's one-bit with error feedback on one tensor: sign of (value + residual) times its mean magnitude
    (over the tensor, or over each block of `block` elements)."""
    fed = value + residual
    signs = tf.where(fed < 0, -1.0, 1.0)  # as the core's codec: zero goes as +scale
    if block is None:
        sent = signs * tf.reduce_mean(tf.abs(fed))
    else:
        flat = tf.reshape(fed, [-1])
        blocks = tf.range(tf.size(flat)) // block
        scales = tf.gather(tf.math.segment_mean(tf.abs(flat), blocks), blocks)
        sent = signs * tf.reshape(scales, tf.shape(fed))
    return sent, fed - sent


def train(tf, variant, args, data):
    from bps_tf.ops.compression import MIN_COMPRESS_BYTES_DEFAULT  # smaller tensors travel exactly

    compressed, block, exact_second_moment = VARIANTS[variant]

    x_train, y_train, x_test, y_test = data
    model = build(tf, "encoder")
    weights = model.trainable_variables
    zeros = [tf.zeros_like(w) for w in weights]
    first, second, residual = list(zeros), list(zeros), list(zeros)
    beta1, beta2, epsilon = 0.9, 0.999, 1e-7  # Keras Adam's defaults
    loss_of = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y, first, second, residual, t):
        with tf.GradientTape() as tape:
            loss = loss_of(y, model(x, training=True))
        grads = tape.gradient(loss, weights)
        rate = args.learning_rate * tf.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        out_first, out_second, out_residual = [], [], []
        for w, g, m, v, r in zip(weights, grads, first, second, residual):
            g = tf.convert_to_tensor(g)
            sent = g
            if compressed and g.shape.num_elements() * 4 >= MIN_COMPRESS_BYTES_DEFAULT:
                sent, r = onebit(tf, g, r, block)
            m = beta1 * m + (1 - beta1) * sent
            v = beta2 * v + (1 - beta2) * tf.square(g if exact_second_moment else sent)
            w.assign_sub(rate * m / (tf.sqrt(v) + epsilon))
            out_first.append(m), out_second.append(v), out_residual.append(r)
        return out_first, out_second, out_residual

    rng, steps, curve = np.random.default_rng(0), 0, []
    for epoch in range(args.max_epochs):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order) - args.batch + 1, args.batch):
            batch = order[start:start + args.batch]
            steps += 1
            first, second, residual = step(x_train[batch], y_train[batch], first, second, residual,
                                           tf.constant(float(steps)))
        accuracy = float(np.mean(np.argmax(model(x_test).numpy(), axis=1) == y_test))
        curve.append({"epoch": epoch + 1, "steps": steps, "accuracy": accuracy})
        if accuracy >= args.target:
            break
    reached = next((p for p in curve if p["accuracy"] >= args.target), None)
    return {"variant": variant, "curve": curve, "reached": reached}


def main():
    args = parse_args()
    for name, value in LEGACY_KERAS.items():  # tf-keras, as in the time-to-accuracy benchmark's workers
        os.environ.setdefault(name, value)
    import tensorflow as tf

    x_train, y_train, x_test, y_test = load(rank=0, size=1)
    data = (inputs_for("encoder", x_train), y_train, inputs_for("encoder", x_test), y_test)
    runs = []
    for variant in VARIANTS:
        run = train(tf, variant, args, data)
        reached = run["reached"]
        print(f"{variant}: " + (f"{reached['accuracy']:.3f} after {reached['steps']} steps" if reached else
                                f"not reached in {run['curve'][-1]['steps']} steps (best "
                                f"{max(p['accuracy'] for p in run['curve']):.3f})"), flush=True)
        runs.append(run)
    if args.output:
        Path(args.output).write_text(json.dumps({"benchmark": "onebit_adam", "target": args.target,
                                                 "batch": args.batch, "learning_rate": args.learning_rate,
                                                 "runs": runs}, indent=1))


if __name__ == "__main__":
    main()

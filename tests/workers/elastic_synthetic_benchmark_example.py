"""The shape of Horovod's elastic TensorFlow 2 synthetic benchmark (examples/elastic/tensorflow2/
tensorflow2_synthetic_benchmark_elastic.py) on bps_tf, with only the import changed under tf-keras: the same
arguments, calls and order. One training batch before the state exists, a tf.function step with
DistributedGradientTape and `hvd.Compression.fp16` (--fp16-allreduce), TensorFlowKerasState(model, opt,
img_secs=[], iter=0, batch=0, warm=False) whose attributes the benchmark changes inside elastic.run (warm-up,
then img/sec per iteration appended to state.img_secs), a commit every --num-batches-per-commit batches and
after every iteration, a reset callback that assigns `opt.lr`, and the results logged by rank 0.

What cannot run here is replaced: a small convolutional model on 16x16 images instead of
`tf.keras.applications.<--model>(weights=None)` on 224x224 (without batch normalisation, whose moving
statistics each worker would keep from its own random data), 10 classes instead of 1000; --log-dir for the
test.

Under Keras 3 (the default) only Keras 3's own API change applies, marked "Keras 3:" below: `opt.lr` is
`opt.learning_rate`.

Added for the test (testing.elastic_steps): each step is logged, a worker started again waits before init() until
the others went on without it, and at the end every worker prints its weights' fingerprint and how many img/sec
measurements its state holds.

Usage: elastic_synthetic_benchmark_example.py --log-dir DIR [Horovod's arguments]. Keras 3, or tf-keras with
TF_USE_LEGACY_KERAS=1."""

import argparse
import faulthandler
import os
import signal
import timeit

import numpy as np
import tensorflow as tf

import bps_tf.tensorflow as hvd
from testing.digits import fingerprint
from testing.elastic_steps import log_step, wait_until_the_others_went_on

KERAS3 = os.environ.get("TF_USE_LEGACY_KERAS") != "1"
faulthandler.register(signal.SIGUSR1)  # a stuck worker shows where it is

parser = argparse.ArgumentParser(description='TensorFlow Synthetic Benchmark',
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--fp16-allreduce', action='store_true', default=False,
                    help='use fp16 compression during allreduce')
parser.add_argument('--batch-size', type=int, default=16, help='input batch size')
parser.add_argument('--num-warmup-batches', type=int, default=10,
                    help='number of warm-up batches that don\'t count towards benchmark')
parser.add_argument('--num-batches-per-iter', type=int, default=10,
                    help='number of batches per benchmark iteration')
parser.add_argument('--num-iters', type=int, default=10, help='number of benchmark iterations')
parser.add_argument('--num-batches-per-commit', type=int, default=1,
                    help='number of batches per commit of the elastic state object')
parser.add_argument('--no-cuda', action='store_true', default=False, help='disables CUDA training')
parser.add_argument('--log-dir', required=True, help='where the test finds each step')

args = parser.parse_args()
args.cuda = not args.no_cuda

wait_until_the_others_went_on(args.log_dir)  # for the test
hvd.init()

if args.cuda:
    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')
else:
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"

lr = 0.01
model = tf.keras.Sequential([
    tf.keras.Input((16, 16, 3)),
    tf.keras.layers.Conv2D(8, 3, activation='relu'),
    tf.keras.layers.MaxPooling2D(),
    tf.keras.layers.Conv2D(16, 3, activation='relu'),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(10, activation='softmax'),
])
opt = tf.optimizers.SGD(lr * hvd.size())

data = tf.random.uniform([args.batch_size, 16, 16, 3])
target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=10, dtype=tf.int64)


@tf.function
def train_one_batch():
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    with tf.GradientTape() as tape:
        probs = model(data, training=True)
        loss = tf.losses.sparse_categorical_crossentropy(target, probs)

    tape = hvd.DistributedGradientTape(tape, compression=compression)

    gradients = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(gradients, model.trainable_variables))


def benchmark_step(state):
    train_one_batch()
    if state is not None:
        state.batch += 1
        if state.batch == args.num_batches_per_commit:
            state.batch = 0
            state.commit()
        log_step(args.log_dir, state.warm, state.iter, state.batch)  # for the test


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end='\n' if nl else '')


log('Model: a small convolutional model')
log('Batch size: %d' % args.batch_size)
device = 'GPU' if args.cuda else 'CPU'
log('Number of %ss: %d' % (device, hvd.size()))

# Makes the model's and the optimizer's variables before the state is made.
train_one_batch()


@hvd.elastic.run
def run_benchmark(state):
    with tf.device(device):
        if not state.warm:
            log('Running warmup...')
            timeit.timeit(lambda: benchmark_step(state), number=args.num_warmup_batches)
            state.warm = True
            state.commit()

        if state.iter == 0:
            log('Running benchmark...')
        for x in range(state.iter, args.num_iters):
            time = timeit.timeit(lambda: benchmark_step(state), number=args.num_batches_per_iter)
            img_sec = args.batch_size * args.num_batches_per_iter / time
            log('Iter #%d: %.1f img/sec per %s' % (x, img_sec, device))
            state.img_secs.append(img_sec)
            state.iter = x
            state.commit()


def on_state_reset():
    if KERAS3:  # Keras 3: `opt.lr` is `opt.learning_rate`
        opt.learning_rate.assign(lr * hvd.size())
    else:
        opt.lr.assign(lr * hvd.size())


state = hvd.elastic.TensorFlowKerasState(model, opt, img_secs=[], iter=0, batch=0, warm=False)
state.register_reset_callbacks([on_state_reset])
run_benchmark(state)

img_sec_mean = np.mean(state.img_secs)
img_sec_conf = 1.96 * np.std(state.img_secs)
log('Img/sec per %s: %.1f +-%.1f' % (device, img_sec_mean, img_sec_conf))
log('Total img/sec on %d %s(s): %.1f +-%.1f' %
    (hvd.size(), device, hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))

print(f"rank {hvd.rank()}: weights {fingerprint(model.get_weights())} img_secs {len(state.img_secs)} "
      f"iter {state.iter} size {hvd.size()} learning rate {float(opt.learning_rate.numpy()):.4f}", flush=True)

"""Keras fit with CommunicationMetrics and Keras's TensorBoard callback, then a custom loop writing the same
figures through write_communication_summaries. Usage: communication_metrics.py LOG_DIR COMPRESSION
(none or onebit). Worker 1 starts each step late, so that worker 0 waits for it at the servers. Each worker
writes its events under LOG_DIR/<rank>/ and LOG_DIR/<rank>.json: its gradients' sizes and History's keys."""

import json
import os
import sys
import time
from pathlib import Path

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras
import tensorflow as tf

import bps_tf as bps
import bps_tf.keras as bps_keras
from testing.digits import load

STRAGGLER_SECONDS = 0.05
EPOCHS = 3


class LateStart(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        time.sleep(STRAGGLER_SECONDS)


def build_model():
    keras.utils.set_random_seed(1)
    return keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(300, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


def compression(name):
    return bps.Compression.onebit if name == "onebit" else bps.Compression.none


def fit(model, log_dir, rank, compressor):
    x, y, _, _ = load(rank, bps.size())
    model.compile(optimizer=bps.DistributedOptimizer(keras.optimizers.SGD(0.05), compression=compressor),
                  loss="sparse_categorical_crossentropy")
    callbacks = [bps_keras.callbacks.BroadcastGlobalVariablesCallback(0)]
    if rank == 1:
        callbacks.append(LateStart())
    callbacks += [bps_keras.callbacks.CommunicationMetrics(every_n_steps=3),
                  keras.callbacks.TensorBoard(log_dir=str(log_dir / "fit"), update_freq=1)]
    history = model.fit(x, y, batch_size=32, epochs=EPOCHS, shuffle=False, callbacks=callbacks, verbose=0)
    return sorted(history.history)


def custom_loop(model, log_dir, rank, compressor):
    x, y, _, _ = load(rank, bps.size())
    optimizer = keras.optimizers.SGD(0.05)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    meter = bps.CommunicationMeter()
    with tf.summary.create_file_writer(str(log_dir / "loop")).as_default():
        for step in range(4):
            with bps.DistributedGradientTape(tf.GradientTape(), compression=compressor) as tape:
                loss = loss_fn(y[:32], model(x[:32], training=True))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            if step % 2 == 1:
                bps.write_communication_summaries(meter, steps=2, step=step)


def main():
    log_dir, compression_name = Path(sys.argv[1]), sys.argv[2]
    bps.init()
    rank = bps.rank()
    model = build_model()
    compressor = compression(compression_name)
    history_keys = fit(model, log_dir / str(rank), rank, compressor)
    custom_loop(model, log_dir / str(rank), rank, compressor)
    sizes = [int(v.shape.num_elements()) for v in model.trainable_variables]
    (log_dir / f"{rank}.json").write_text(json.dumps({"gradient_elements": sizes, "history": history_keys}))
    print(f"rank {rank}: done", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()

"""Code written for MultiWorkerMirroredStrategy (TensorFlow's multi-worker Keras tutorial) with the strategy
swapped for BytePSStrategy: the cluster resolver says who is chief and where to write, the model is built,
compiled and trained inside the scope with ModelCheckpoint and BackupAndRestore on the same shared paths on
every worker, and every worker loads the checkpoint right after fit (no barrier of its own). A variable
created on worker 0 only inside the scope must not stop the job.

Runs under Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1 (tf.keras follows).

    strategy_real_client.py DIR [DEVICES]   # DIR: shared by the workers, as a network file system would be;
                                            # DEVICES: logical CPU devices per worker (default 1)
"""

import os
import sys

import numpy as np

from testing.worker_setup import split_cpu  # noqa: E402

split_cpu(int(sys.argv[2]) if len(sys.argv) > 2 else 1)

import tensorflow as tf  # noqa: E402

import bps_tf  # noqa: E402
from bps_tf import BytePSStrategy  # noqa: E402
from testing.agreement import assert_identical_everywhere  # noqa: E402

keras = tf.keras


def is_chief(task_type, task_id):
    # As the tutorial writes it: no task type means a single machine.
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)


def write_filepath(filepath, task_type, task_id):
    """The tutorial's rule: the chief writes to the real path, the others to a scratch directory."""
    dirpath, base = os.path.split(filepath)
    if not is_chief(task_type, task_id):
        dirpath = os.path.join(dirpath, f"workertemp_{task_id}")
    os.makedirs(dirpath, exist_ok=True)
    return os.path.join(dirpath, base)


def check_cluster_resolver(strategy, rank, size):
    resolver = strategy.cluster_resolver
    assert resolver is not None, "strategy.cluster_resolver is None"
    assert (resolver.task_type, resolver.task_id) == ("worker", rank), (resolver.task_type, resolver.task_id)
    spec = resolver.cluster_spec().as_dict()
    assert list(spec) == ["worker"] and len(spec["worker"]) == size, spec
    assert resolver.num_accelerators() is not None
    assert strategy.extended._task_type == "worker" and strategy.extended._task_id == rank
    assert strategy.extended.should_checkpoint == (rank == 0)
    assert is_chief(resolver.task_type, resolver.task_id) == (rank == 0)


def dataset(rank):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 6)).astype(np.float32)
    y = (x[:, :3].sum(axis=1) > 0).astype(np.int64)
    return x[rank::2], y[rank::2]  # each worker its own half


def main():
    root = sys.argv[1]
    strategy = BytePSStrategy()
    rank, size = bps_tf.rank(), bps_tf.size()
    check_cluster_resolver(strategy, rank, size)
    resolver = strategy.cluster_resolver
    checkpoint = os.path.join(root, "model.keras")  # the same path everywhere

    x, y = dataset(rank % 2)
    with strategy.scope():  # everything inside the scope, as the tutorials and many users write it
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if rank == 0:
            only_here = tf.Variable(1.0, name="created_on_worker_0_only")  # e.g. saving code's own variables
            assert float(only_here.numpy()) == 1.0
        callbacks = [keras.callbacks.ModelCheckpoint(checkpoint),
                     keras.callbacks.BackupAndRestore(os.path.join(root, "backup"))]
        history = model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=callbacks)
        # Keras wrote the checkpoint on worker 0 only; every worker reads it back at once.
        restored = keras.models.load_model(checkpoint)
    for saved, trained in zip(restored.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(saved, trained)
    assert_identical_everywhere(model.get_weights(), "real-client-weights")

    path = write_filepath(os.path.join(root, "saved", "final.keras"),
                          resolver.task_type, resolver.task_id)
    model.save(path)
    if not is_chief(resolver.task_type, resolver.task_id):
        os.remove(path)  # the tutorial's clean-up of scratch copies
    print(f"rank {rank}: real client code ok, loss {history.history['loss'][-1]:.3f}", flush=True)
    bps_tf.shutdown()


if __name__ == "__main__":
    sys.exit(main())

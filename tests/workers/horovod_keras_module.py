"""bps_tf.keras as horovod.tensorflow.keras users call it, against NumPy references: the functions on NumPy
values, SyncBatchNormalization equal to BatchNormalization over every worker's batch together, the gradient
arguments of DistributedGradientTape and DistributedOptimizer (predivide factor, local variables, local
layers), a LossScaleOptimizer in a DistributedOptimizer, and BestModelCheckpoint writing on worker 0 only.

Runs under Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1 (tf.keras follows)."""

import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

import bps_tf.keras as hvd
import bps_tf.tensorflow as bps

keras = tf.keras


def rows(rank, count, width=3):
    """`count` rows that differ by worker, exact in float32."""
    return (np.arange(count * width, dtype=np.float32).reshape(count, width) * 0.25 + rank * 2.0) % 7.0


def check_functions(rank, size):
    mine = rows(rank, 2)
    everyone = [rows(r, 2) for r in range(size)]
    np.testing.assert_allclose(hvd.allreduce(mine).numpy(), np.mean(everyone, 0), rtol=1e-6)
    np.testing.assert_array_equal(hvd.allreduce(mine, op=hvd.Sum).numpy(), np.sum(everyone, 0))
    np.testing.assert_array_equal(hvd.allreduce([1, 2, rank], op=hvd.Sum, name="list").numpy(),
                                  [size, 2 * size, sum(range(size))])
    uneven = hvd.allgather(rows(rank, rank + 1), name="uneven").numpy()  # worker r has r + 1 rows
    np.testing.assert_array_equal(uneven, np.concatenate([rows(r, r + 1) for r in range(size)]))
    np.testing.assert_array_equal(hvd.broadcast(mine, root_rank=size - 1).numpy(), rows(size - 1, 2))
    scattered = hvd.reducescatter(rows(rank, 2 * size)).numpy()
    np.testing.assert_allclose(scattered, np.mean([rows(r, 2 * size) for r in range(size)], 0)[2 * rank:2 * rank + 2],
                               rtol=1e-6)


def check_sync_batch_norm(rank, size):
    batch = np.random.default_rng(7).normal(size=(4 * size, 5, 3)).astype(np.float32)
    mine = batch[4 * rank:4 * rank + 4]
    sync = hvd.SyncBatchNormalization(momentum=0.5)
    reference = keras.layers.BatchNormalization(momentum=0.5)
    for step in range(2):  # the second step starts from the moving statistics the first left
        expected = reference(batch * (step + 1), training=True).numpy()[4 * rank:4 * rank + 4]
        np.testing.assert_allclose(sync(mine * (step + 1), training=True).numpy(), expected, atol=2e-5)
    np.testing.assert_allclose(sync.moving_mean.numpy(), reference.moving_mean.numpy(), atol=2e-5)
    np.testing.assert_allclose(sync.moving_variance.numpy(), reference.moving_variance.numpy(), atol=2e-5)
    in_function = tf.function(lambda x: sync(x, training=True))
    expected = reference(batch, training=True).numpy()[4 * rank:4 * rank + 4]
    np.testing.assert_allclose(in_function(mine).numpy(), expected, atol=2e-5)
    # Inference uses the moving statistics, which are the same on every worker: no communication.
    np.testing.assert_allclose(sync(mine, training=False).numpy(), reference(mine, training=False).numpy(), atol=2e-5)


def two_layer_model():
    keras.utils.set_random_seed(5)  # the same initial weights on every worker
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="shared"),
                              keras.layers.Dense(1, name="local")])
    return model


def local_gradients(model, rank):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(rows(rank, 4)) ** 2)
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def check_gradient_arguments(rank, size):
    model = two_layer_model()
    everyone = [local_gradients(model, r) for r in range(size)]
    averaged = [np.mean([g[i] for g in everyone], 0) for i in range(len(everyone[0]))]

    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(rows(rank, 4)) ** 2)
    tape = bps.DistributedGradientTape(tape, gradient_predivide_factor=2.0)
    for got, want in zip(tape.gradient(loss, model.trainable_variables), averaged):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)

    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(rows(rank, 4)) ** 2)
    tape = bps.PartialDistributedGradientTape(tape, local_layers=model.get_layer("local"), name="partial")
    gradients = tape.gradient(loss, model.trainable_variables)
    mine = everyone[rank]
    for i, (got, variable) in enumerate(zip(gradients, model.trainable_variables)):
        is_local = "local" in variable.path if hasattr(variable, "path") else "local" in variable.name
        want = mine[i] / size if is_local else averaged[i]  # local gradients scaled as the averaged ones are
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)

    # DistributedOptimizer with a registered local variable: one SGD step (learning rate 1).
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), gradient_predivide_factor=2.0,
                                         name="optimizer_arguments")
    local_kernel = model.get_layer("local").kernel
    optimizer.register_local_var(local_kernel)
    before = [v.numpy() for v in model.trainable_variables]
    optimizer.apply_gradients(zip([tf.constant(g) for g in mine], model.trainable_variables))
    for i, variable in enumerate(model.trainable_variables):
        is_local = variable is local_kernel
        want = before[i] - (mine[i] / size if is_local else averaged[i])
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)


def check_loss_scale_optimizer(rank, size):
    """Keras 3's LossScaleOptimizer in a DistributedOptimizer: the scaled gradients are averaged before the
    finiteness check, applied to the variables given or, without them, to those the optimizer was built
    with; an overflow on one worker skips the step and halves the scale on every worker."""
    if not getattr(keras, "__version__", "2").startswith("3."):  # Keras 2 modules have no __version__
        return  # Keras 2's LossScaleOptimizer applies through apply_gradients, as check_gradient_arguments does
    variable = keras.Variable(np.zeros(3, np.float32))
    optimizer = hvd.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0)),
                                         name="loss_scale")
    optimizer.build([variable])
    scale = float(optimizer.dynamic_scale.numpy())
    mean = np.mean(np.arange(1, size + 1, dtype=np.float32))
    scaled = tf.constant(np.full(3, (rank + 1) * scale, np.float32))  # worker r's gradient is r + 1
    optimizer.apply([scaled], [variable])
    np.testing.assert_allclose(variable.numpy(), np.full(3, -mean), rtol=1e-6)
    optimizer.apply([scaled])
    np.testing.assert_allclose(variable.numpy(), np.full(3, -2 * mean), rtol=1e-6)
    overflow = tf.constant(np.full(3, np.inf if rank == 0 else scale, np.float32))
    optimizer.apply([overflow], [variable])
    np.testing.assert_allclose(variable.numpy(), np.full(3, -2 * mean), rtol=1e-6)
    assert float(optimizer.dynamic_scale.numpy()) == scale / 2, (scale, optimizer.dynamic_scale)


def check_best_model_checkpoint(rank, size):
    directory = tempfile.mkdtemp(prefix=f"bps_tf_best_rank{rank}_")  # each worker its own directory
    model = two_layer_model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01), name="best_model"), loss="mse")
    x, y = rows(rank, 32), rows(rank, 32)[:, :1]
    suffix = ".h5" if os.environ.get("TF_USE_LEGACY_KERAS") == "1" else ".keras"
    path = os.path.join(directory, "best" + suffix)
    checkpoint = hvd.callbacks.BestModelCheckpoint(monitor="val_loss", filepath=path)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, validation_data=(x, y), callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback(), checkpoint])
    files = sorted(os.listdir(directory))
    assert files == (["best" + suffix] if rank == 0 else []), files
    try:
        hvd.callbacks.BestModelCheckpoint().on_train_begin()
    except ValueError as error:
        assert "filepath" in str(error), error
    else:
        raise AssertionError("BestModelCheckpoint without a filepath trained on")


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_functions(rank, size)
    check_sync_batch_norm(rank, size)
    check_gradient_arguments(rank, size)
    check_loss_scale_optimizer(rank, size)
    check_best_model_checkpoint(rank, size)
    print(f"rank {rank}: keras module exact", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    sys.exit(main())

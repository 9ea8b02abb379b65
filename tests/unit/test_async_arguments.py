"""What asynchronous training refuses, said when the optimizer, tape or strategy is made (no job needed: before
init() the mode is read from the environment, as init() will read it)."""

import pytest
import tensorflow as tf

import bps_tf as bps
from bps_tf.launcher.arguments import parse_arguments


@pytest.fixture(autouse=True)
def async_environment(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith(("DMLC_", "BYTEPS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("BYTEPS_ENABLE_ASYNC", "1")


def test_the_mode_is_read_from_the_environment_before_init(monkeypatch):
    assert bps.is_async()
    monkeypatch.delenv("BYTEPS_ENABLE_ASYNC")
    assert not bps.is_async()
    monkeypatch.setenv("BYTEPS_STALENESS", "0")
    assert bps.is_async()


@pytest.mark.parametrize("compression", [bps.Compression.fp16, bps.Compression.topk(0.01)])
def test_compression_is_refused(compression):
    with pytest.raises(ValueError, match="gradient compression is not offered with asynchronous training"):
        bps.DistributedOptimizer(tf.keras.optimizers.SGD(0.1), compression=compression)


@pytest.mark.parametrize("make", [bps.DistributedGradientTape, bps.PartialDistributedGradientTape])
def test_a_tape_refuses_compression(make):
    with pytest.raises(ValueError, match="DistributedGradientTape: gradient compression is not offered"):
        make(tf.GradientTape(), compression=bps.Compression.fp16)


def test_tf1_optimizers_are_refused():
    with pytest.raises(ValueError, match="asynchronous training is offered for Keras 3 and tf-keras optimizers"):
        bps.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))


def test_a_keras_optimizer_is_wrapped_for_asynchronous_steps():
    optimizer = bps.DistributedOptimizer(tf.keras.optimizers.SGD(0.1))
    assert optimizer._bps_wrapped
    with pytest.raises(ValueError, match="already a DistributedOptimizer"):
        bps.DistributedOptimizer(optimizer)


def test_bpslaunch_async_flags():
    args = parse_arguments(["--local", "--staleness", "3", "--", "true"])
    assert args.staleness == 3 and not args.async_training
    assert parse_arguments(["--local", "--async", "--", "true"]).async_training


def test_keras_fit_of_an_asynchronous_optimizer_stays_off_xla_where_keras_would_compile(monkeypatch):
    # Keras 3's jit_compile="auto" compiles with XLA where it sees a GPU; the weights travel outside XLA there.
    keras = pytest.importorskip("keras")
    gpu = [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda *args: gpu)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert model.jit_compile  # (the check below could not fail otherwise)
    model.compile(optimizer=bps.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    assert not model.jit_compile
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert model.jit_compile


def test_a_variable_pushed_by_an_optimizer_and_by_a_tape_is_refused():
    from bps_tf.ops import async_weights

    variable = tf.Variable([1.0, 2.0])
    async_weights.claim(variable, "DistributedOptimizer")  # as a DistributedOptimizer's first step does
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(variable * variable)
    with pytest.raises(ValueError, match="trained by both DistributedOptimizer and DistributedGradientTape"):
        bps.DistributedGradientTape(tape).gradient(loss, [variable])


def test_synchronize_weights_refuses_to_run_inside_a_function():
    with pytest.raises(ValueError, match="call it eagerly, outside tf.function"):
        tf.function(bps.synchronize_weights)()

"""Many small tensors pushed at once, step after step, as a model's biases and norms are: several dtypes, odd
sizes, scalars and empty tensors, checked against NumPy's sums. Prints the messages this worker sent to the
servers and the partitions those messages carried (a fused push carries several)."""

import zlib

import ml_dtypes
import numpy as np

import bps_tf.numpy as bps

DTYPES = ["float32", "float16", "bfloat16", "int32", "int64", "float64"]
STEPS = 5


def dtype_of(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def tensors():
    """(name, dtype, shape) of the model: 240 small tensors of odd sizes, scalars and empty ones."""
    specs = []
    for i in range(240):
        dtype = DTYPES[i % len(DTYPES)]
        shape = () if i % 17 == 0 else (0,) if i % 23 == 0 else (1 + (i * 37) % 1531,)
        specs.append((f"small/{i}", dtype, shape))
    return specs


def data(rank, name, dtype, shape, step):
    rng = np.random.default_rng(zlib.crc32(f"{rank}/{name}/{step}".encode()))
    # Integer values (small enough that float16 and bfloat16 hold every sum exactly): exact in any order.
    return rng.integers(-8, 8, size=shape).astype(dtype_of(dtype))


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    specs = tensors()
    partitions = sum(1 for _, _, shape in specs if int(np.prod(shape)) > 0) * STEPS
    before = bps.communication_counters()
    for step in range(STEPS):
        inputs = {name: data(rank, name, dtype, shape, step) for name, dtype, shape in specs}
        handles = {name: bps.push_pull_async(inputs[name], name, average=False, priority=i % 5)
                   for i, (name, _, _) in enumerate(specs)}
        for name, dtype, shape in specs:
            got = bps.synchronize(handles[name])
            expected = np.sum([data(r, name, dtype, shape, step).astype(np.float64) for r in range(size)], axis=0)
            assert got.dtype == dtype_of(dtype) and got.shape == shape, f"{name}: {got.dtype}{got.shape}"
            np.testing.assert_array_equal(got.astype(np.float64), expected, err_msg=f"{name} step {step}")
    after = bps.communication_counters()
    sent = after["messages_sent"] - before["messages_sent"]
    received = after["messages_received"] - before["messages_received"]
    assert 0 < sent <= partitions and received == sent, (sent, received, partitions)
    print(f"rank {rank}: {partitions} partitions in {sent} messages sent, {received} received", flush=True)
    print(f"rank {rank}: small tensors exact", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()

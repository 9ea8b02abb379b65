"""Checks shared by the training tests: every worker holds exactly the same values."""

import numpy as np

import bps_tf.numpy as bps_numpy


def assert_identical_everywhere(arrays, label):
    """Each array equals worker 0's bit for bit (worker 0's values arrive by a zero-sum broadcast)."""
    for index, array in enumerate(arrays):
        array = np.asarray(array)
        bits = array.view(np.int32) if array.dtype.itemsize == 4 else array.view(np.int64)
        mine = bits if bps_numpy.rank() == 0 else np.zeros_like(bits)
        root = bps_numpy.push_pull(mine, f"agreement.{label}.{index}", average=False)
        assert np.array_equal(root, bits), f"{label}: variable {index} differs from worker 0"

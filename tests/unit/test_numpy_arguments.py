"""The NumPy API's argument checks, which need no job (bps_tf.numpy)."""

import numpy as np
import pytest

import bps_tf.numpy as bps


@pytest.mark.parametrize("out, message", [
    (np.zeros(3, np.float32)[::-1], "C-contiguous"),
    (np.zeros(4, np.float32), "C-contiguous array like the input"),
    (np.zeros(3, np.float64), "C-contiguous array like the input"),
])
def test_a_bad_out_array_is_refused(out, message):
    with pytest.raises(ValueError, match=message):
        bps.push_pull_async(np.ones(3, np.float32), "x", out=out, average=False)


def test_a_read_only_out_array_is_refused():
    out = np.zeros(3, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        bps.push_pull_async(np.ones(3, np.float32), "x", out=out, average=False)


@pytest.mark.parametrize("array, name, message", [
    (np.ones(3, np.int8), "x", "unsupported dtype int8"),
    (np.ones(3, np.dtype(np.float32).newbyteorder()), "x", "byte order"),
    (np.ones(3, np.dtype(np.float32).newbyteorder()), "x", "byte order"),  # not cached as float32 either
    (np.ones(3, np.float32), "", "non-empty string name"),
    (np.ones(3, np.int32), "x", "average=True needs a floating dtype"),
])
def test_bad_arrays_and_names_are_refused(array, name, message):
    with pytest.raises(ValueError, match=message):
        bps.push_pull_async(array, name, average=array.dtype == np.int32)

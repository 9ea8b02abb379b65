"""Workers disagreeing on a tensor's shape or dtype: each gets a clear error; the job goes on."""

import numpy as np

import bps_tf.numpy as bps


def expect_error(array, name):
    try:
        bps.push_pull(array, name, average=False)
    except ValueError as error:
        print(f"rank {bps.rank()} caught: {error}", flush=True)
        return
    raise AssertionError(f"no error for mismatched '{name}'")


def main():
    bps.init()
    rank = bps.rank()
    expect_error(np.zeros((3, 4 + rank), np.float32), "shape-mismatch")
    expect_error(np.zeros(8, np.float32 if rank == 0 else np.float64), "dtype-mismatch")
    # Locally: one name for two different tensors.
    bps.push_pull(np.zeros(4, np.float32), "reused", average=False)
    expect_error(np.zeros(5, np.float32), "reused")
    # The job still works.
    assert bps.push_pull(np.ones(3, np.float32), "fine", average=False)[0] == bps.size()
    print(f"rank {rank}: job still works", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()

"""push_pulls until the job fails, then reports the error and how long it took to arrive."""

import sys
import time

import numpy as np

import bps_tf.numpy as bps


def main():
    bps.init()
    print("joined", flush=True)
    tensor = np.ones(1_000_000, np.float32)
    last_success = time.monotonic()
    try:
        while True:
            bps.push_pull(tensor, "grad", average=False)
            last_success = time.monotonic()
            time.sleep(0.01)
    except Exception as error:  # the expected failure
        print(f"failed after {time.monotonic() - last_success:.2f} s: {type(error).__name__}: {error}", flush=True)
        sys.exit(7)


if __name__ == "__main__":
    main()

"""Hundreds of tensors in flight at once, and many rounds of the same tensor."""

import numpy as np

import bps_tf.numpy as bps


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    # 200 tensors enqueued before any is awaited; each worker enqueues in a different order.
    order = list(range(200)) if rank % 2 == 0 else list(reversed(range(200)))
    handles = {t: bps.push_pull_async(np.full(1 + 997 * t, t + rank, np.float32), f"t{t}", average=False,
                                      priority=t % 7)
               for t in order}
    for t, handle in handles.items():
        got = bps.synchronize(handle)
        expected = size * t + size * (size - 1) / 2
        assert np.all(got == expected), f"tensor {t}: {got[:3]} != {expected}"
    # 100 rounds of one tensor, in place, the value changing every round.
    buffer = np.zeros(100_003, np.int64)
    for round_index in range(100):
        buffer[:] = round_index * 10 + rank
        bps.synchronize(bps.push_pull_async(buffer, "same", out=buffer, average=False))
        assert np.all(buffer == size * round_index * 10 + size * (size - 1) // 2), f"round {round_index}"
    print(f"rank {rank}: 200 in flight and 100 rounds exact", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()

"""Compressed push_pull across workers, round after round, against a NumPy model of the whole path: each
worker's momentum, encoding and error feedback, the server's sum of the decoded pushes, and the server's
encoding of that sum with its own error feedback. Random-k is checked for exact sums of the chosen
elements over a tensor of several partitions. Run with BYTEPS_PARTITION_BYTES=65536."""

import numpy as np
import tensorflow as tf

import bps_tf as bps

ROUNDS = 3


def onebit(values):
    scale = np.float32(np.abs(values).astype(np.float64).sum() / values.size)
    return np.where(values < 0, -scale, scale).astype(np.float32)


def topk(ratio):
    def encode(values):
        k = min(values.size, max(1, int(np.rint(np.float64(np.float32(ratio)) * values.size))))
        keep = np.argsort(-np.abs(values), kind="stable")[:k]
        out = np.zeros_like(values)
        out[keep] = values[keep]
        return out
    return encode


class Model:
    """The reference: what every worker receives, round by round (one partition)."""

    def __init__(self, encode, workers, n, momentum=0.0, error_feedback=True):
        self.encode, self.momentum, self.feedback = encode, np.float32(momentum), error_feedback
        self.carry = [np.zeros(n, np.float32) for _ in range(workers)]
        self.velocity = [np.zeros(n, np.float32) for _ in range(workers)]
        self.server_carry = np.zeros(n, np.float32)

    def round(self, gradients):
        total = np.zeros_like(self.server_carry)
        for w, g in enumerate(gradients):
            if not self.feedback:
                self.carry[w][:] = 0
            if self.momentum:
                self.velocity[w] = self.momentum * self.velocity[w] + g
                self.carry[w] += g + self.momentum * self.velocity[w]
            else:
                self.carry[w] += g
            sent = self.encode(self.carry[w])
            self.carry[w] = self.carry[w] - sent if self.feedback else self.carry[w]
            total += sent
        if self.feedback:
            total += self.server_carry
        result = self.encode(total)
        if self.feedback:
            self.server_carry = total - result
        return result


def gradient(worker, round_, n):
    return np.random.default_rng(1000 * worker + round_ + n).standard_normal(n).astype(np.float32)


def check_against_model(rank, size, compression, encode, n, **options):
    model = Model(encode, size, n, **options)
    name = f"cs.{compression.wire}.{n}"
    for r in range(ROUNDS):
        expected = model.round([gradient(w, r, n) for w in range(size)])
        got = bps.push_pull(tf.constant(gradient(rank, r, n)), name=name, op=bps.Sum, compression=compression).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=f"{name} round {r}")
        everyone = bps.push_pull(tf.constant(got), name=name + ".agree", op=bps.Sum).numpy()
        np.testing.assert_array_equal(everyone, size * got, err_msg=f"{name}: workers received different sums")


def check_random_k(rank, size):
    n = 100003  # seven partitions of 64 KiB
    compression = bps.Compression.randomk(0.05, error_feedback=False)

    @tf.function
    def step(x):
        return bps.push_pull(x, name="rk", op=bps.Sum, compression=compression)

    for r in range(ROUNDS):
        given = [np.float32(np.random.default_rng(w * 7 + r).integers(1, 50, n)) for w in range(size)]
        got = step(tf.constant(given[rank])).numpy()
        chosen = got != 0
        np.testing.assert_array_equal(got[chosen], sum(given)[chosen])
        assert abs(int(chosen.sum()) - round(0.05 * n)) <= 7, int(chosen.sum())  # k per partition, rounded


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    C = bps.Compression
    for n in (1, 7, 10001):
        check_against_model(rank, size, C.onebit(min_bytes=0), onebit, n)
        check_against_model(rank, size, C.onebit(momentum=0.9, min_bytes=0), onebit, n, momentum=0.9)
        check_against_model(rank, size, C.topk(0.01, min_bytes=0), topk(0.01), n)
        check_against_model(rank, size, C.topk(0.3, error_feedback=False, min_bytes=0), topk(0.3), n,
                            error_feedback=False)
    check_random_k(rank, size)
    # Below min_bytes a tensor travels exactly; non-sums are refused.
    small = bps.push_pull(tf.constant([1.5, -2.0]), name="small", op=bps.Sum, compression=C.onebit).numpy()
    np.testing.assert_array_equal(small, size * np.array([1.5, -2.0], np.float32))
    try:
        bps.push_pull(tf.ones([20000]), name="max", op=bps.Max, compression=C.onebit)
        raise AssertionError("a compressed max was accepted")
    except ValueError as e:
        assert "sums and averages" in str(e), e
    print(f"rank {rank}: compressed sums match the model", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()

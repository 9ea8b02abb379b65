"""This worker's communication per training step, from the core's counters (bps_tf.numpy.communication_counters):
what bps_tf.keras.callbacks.CommunicationMetrics puts into Keras's logs and
bps_tf.tensorflow.write_communication_summaries writes as tf.summary scalars."""

import bps_tf.numpy as bps_numpy
from bps_tf.process import is_initialized, size

# The figures, as Keras logs and TensorBoard name them.
PUSH_PULL_MS = "bps/push_pull_ms"
WAIT_MS = "bps/wait_ms"
BYTES_PUSHED = "bps/bytes_pushed"
BYTES_PULLED = "bps/bytes_pulled"
MESSAGES_SENT = "bps/messages_sent"
MESSAGES_RECEIVED = "bps/messages_received"
COMPRESSION_RATIO = "bps/compression_ratio"
WORKERS = "bps/workers"


class CommunicationMeter:
    """Reads the figures per step of the steps between two readings (the first: since the meter was made)."""

    def __init__(self):
        self._last = bps_numpy.communication_counters()

    def read(self, steps):
        """The figures per step over the last `steps` steps, as a dict:

        - bps/push_pull_ms: wall time with a push_pull in flight;
        - bps/wait_ms: the part of it this worker's pushes waited at the servers for the slowest worker;
        - bps/bytes_pushed, bps/bytes_pulled: bytes as they travel, after the core's compression;
        - bps/messages_sent, bps/messages_received: the messages to and from the servers that carried them
          (a message holding several small partitions for one server counts once);
        - bps/compression_ratio: bytes pushed over what they would be uncompressed (1 without compression;
          Compression.fp16 casts before the push, so its savings show in the bytes, not here);
        - bps/workers: the job's workers now (they change in elastic jobs).
        """
        if steps < 1:
            raise ValueError(f"CommunicationMeter.read: steps must be at least 1, got {steps}")
        now = bps_numpy.communication_counters()
        delta = {key: now[key] - self._last[key] for key in now if not isinstance(now[key], dict)}
        self._last = now
        uncompressed = delta["uncompressed_bytes_pushed"]
        figures = {
            PUSH_PULL_MS: delta["push_pull_seconds"] * 1000.0 / steps,
            WAIT_MS: delta["wait_seconds"] * 1000.0 / steps,
            BYTES_PUSHED: delta["bytes_pushed"] / steps,
            BYTES_PULLED: delta["bytes_pulled"] / steps,
            MESSAGES_SENT: delta["messages_sent"] / steps,
            MESSAGES_RECEIVED: delta["messages_received"] / steps,
            COMPRESSION_RATIO: delta["bytes_pushed"] / uncompressed if uncompressed else 1.0,
        }
        if is_initialized():
            figures[WORKERS] = float(size())
        return figures

"""Gradient compression on the wire.

`Compression.none` and `Compression.fp16` work as in Horovod: the tensor is cast before the push and back
after the pull. The others are encoded by bps_tf's core, per partition, on the worker and on the server
(which decodes every push, sums, and encodes the sum for the pull, so both directions shrink):

- `Compression.onebit`: the sign of each element and one scale per partition (the mean magnitude): 32x
  fewer bytes than float32.
- `Compression.topk(ratio)`: the `ratio` of elements largest in magnitude, with their indices (8 bytes each).
- `Compression.randomk(ratio)`: `ratio` of the elements at indices drawn from a seed every peer shares: 4
  bytes each, and the sum of the chosen elements is exact.

Each keeps what it dropped and adds it to the next step's gradient (error feedback, on by default), on the
workers and on the servers. `momentum=M` folds Nesterov momentum into the gradient before it is compressed
(then use the optimizer without momentum), as 1-bit SGD and deep gradient compression do. Options:
`Compression.onebit(momentum=0.9)`, `Compression.topk(0.01, error_feedback=False)`; or a string, as in
BYTEPS_COMPRESSION: `Compression.parse("topk:0.01,momentum=0.9")`.

These apply to floating gradients of at least `min_bytes` (BYTEPS_MIN_COMPRESS_BYTES, 65536 by default):
smaller ones gain little and go uncompressed. Floating tensors other than float32 travel as float32.
"""

import os

import tensorflow as tf

MIN_COMPRESS_BYTES_DEFAULT = 65536


class NoneCompressor:
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor


class FP16Compressor:
    """Floating tensors travel as float16; others unchanged."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor if context is None else tf.cast(tensor, context)


def _min_bytes_from_environment():
    text = os.environ.get("BYTEPS_MIN_COMPRESS_BYTES", str(MIN_COMPRESS_BYTES_DEFAULT))
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"BYTEPS_MIN_COMPRESS_BYTES={text!r}: give a number of bytes (0 compresses every tensor)")
    return value


class WireCodec(NoneCompressor):
    """A compression the core performs on the wire (see the module's documentation). Calling it with
    options gives a variant: `Compression.onebit(momentum=0.9)`. In TensorFlow it changes nothing (compress
    and decompress are NoneCompressor's): the op encodes."""

    def __init__(self, kind, ratio=None, momentum=0.0, error_feedback=True, min_bytes=None):
        if kind not in ("onebit", "topk", "randomk"):
            raise ValueError(f"unknown compression {kind!r}: use onebit, topk or randomk")
        if (ratio is None) != (kind == "onebit"):
            raise ValueError(f"{kind} takes {'no ratio' if kind == 'onebit' else 'a ratio in (0, 1]'}")
        if ratio is not None and not 0 < float(ratio) <= 1:
            raise ValueError(f"{kind}: ratio must lie in (0, 1], got {ratio}")
        if not 0 <= float(momentum) < 1:
            raise ValueError(f"{kind}: momentum must lie in [0, 1), got {momentum}")
        if min_bytes is not None and int(min_bytes) < 0:
            raise ValueError(f"{kind}: min_bytes must be >= 0, got {min_bytes}")
        self.kind = kind
        self.ratio = None if ratio is None else float(ratio)
        self.momentum = float(momentum)
        self.error_feedback = bool(error_feedback)
        self._min_bytes = None if min_bytes is None else int(min_bytes)

    def __call__(self, ratio=None, momentum=None, error_feedback=None, min_bytes=None):
        return WireCodec(self.kind, self.ratio if ratio is None else ratio,
                         self.momentum if momentum is None else momentum,
                         self.error_feedback if error_feedback is None else error_feedback,
                         self._min_bytes if min_bytes is None else min_bytes)

    @property
    def min_bytes(self):
        return _min_bytes_from_environment() if self._min_bytes is None else self._min_bytes

    @property
    def wire(self):
        """The spelling the core reads (the op's `compression` attribute, BYTEPS_COMPRESSION)."""
        text = self.kind if self.ratio is None else f"{self.kind}:{self.ratio!r}"
        if self.momentum:
            text += f",momentum={self.momentum!r}"
        if not self.error_feedback:
            text += ",ef=0"
        return text

    def applies_to(self, tensor):
        shape = tensor.shape
        if not tensor.dtype.is_floating or not shape.is_fully_defined():
            return False
        return shape.num_elements() * 4 >= self.min_bytes

    def __eq__(self, other):
        return isinstance(other, WireCodec) and (self.wire, self._min_bytes) == (other.wire, other._min_bytes)

    def __hash__(self):
        return hash((self.wire, self._min_bytes))

    def __repr__(self):
        return f"Compression.parse({self.wire!r})"


def wire_codec(compression):
    """`compression` if the core encodes it, else None."""
    return compression if isinstance(compression, WireCodec) else None


def parse(text):
    """A compression from its spelling: none, fp16, onebit, topk:RATIO or randomk:RATIO, optionally followed
    by ,momentum=M and ,ef=0 (no error feedback)."""
    text = (text or "").strip()
    if text in ("", "none"):
        return NoneCompressor
    if text == "fp16":
        return FP16Compressor
    head, *options = text.split(",")
    kind, _, ratio = head.partition(":")
    kwargs = {}
    try:
        if ratio:
            kwargs["ratio"] = float(ratio)
        for option in options:
            key, _, value = option.partition("=")
            if key == "momentum":
                kwargs["momentum"] = float(value)
            elif key == "ef" and value in ("0", "1"):
                kwargs["error_feedback"] = value == "1"
            else:
                raise ValueError(f"unknown option {option!r}")
        return WireCodec(kind, **kwargs)
    except ValueError as e:
        raise ValueError(f"compression {text!r}: {e}. Write none, fp16, onebit, topk:RATIO or randomk:RATIO, "
                         "optionally followed by ,momentum=M and ,ef=0") from None


def from_environment():
    """BYTEPS_COMPRESSION's compression (none when unset)."""
    return parse(os.environ.get("BYTEPS_COMPRESSION", ""))


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    onebit = WireCodec("onebit")
    parse = staticmethod(parse)

    @staticmethod
    def topk(ratio, momentum=0.0, error_feedback=True, min_bytes=None):
        return WireCodec("topk", ratio, momentum, error_feedback, min_bytes)

    @staticmethod
    def randomk(ratio, momentum=0.0, error_feedback=True, min_bytes=None):
        return WireCodec("randomk", ratio, momentum, error_feedback, min_bytes)

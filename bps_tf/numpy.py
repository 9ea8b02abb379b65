"""Framework-neutral API on NumPy arrays (`import bps_tf.numpy as bps`): join the job, push_pull arrays by
name. push_pull averages by default, as bps_tf's TensorFlow push_pull and BytePS's do; average=False sums.

op="weights" (asynchronous training: BYTEPS_ENABLE_ASYNC=1 or BYTEPS_STALENESS, is_async()): the servers keep
the named value. A worker's first push_pull of a name sends its initial value (the first to arrive sets it),
every later one a change that the servers add; each returns the servers' current value, at once (with
BYTEPS_STALENESS=s, once this worker is no more than s pushes ahead of the slowest). Pass average=False.

Used by tests and benchmarks, and by the TensorFlow layer underneath.
"""

import numpy as np

from bps_tf._native import load_core
from bps_tf.process import (backup_workers, init, is_async, is_initialized, join, local_rank, local_size,  # noqa: F401
                            rank, shutdown, size, staleness)

_core = load_core()

# NumPy dtype names the core accepts (bfloat16 comes from ml_dtypes, which TensorFlow installs).
SUPPORTED_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")


class Handle:
    """An asynchronous push_pull in flight; pass it to synchronize()."""

    __slots__ = ("_handle", "_input", "output", "_divisor")

    def __init__(self, handle, input_array, output_array, divisor):
        self._handle = handle
        self._input = input_array  # kept alive: the core reads and writes them until completion
        self.output = output_array
        self._divisor = divisor  # of an average; None otherwise

    def done(self):
        return _core.poll(self._handle)


def _dtype_names():
    """NumPy dtype -> the core's name for it, for the supported dtypes NumPy knows here."""
    names = {}
    for name in SUPPORTED_DTYPES:
        try:
            names[np.dtype(name)] = name
        except TypeError:  # bfloat16 exists once ml_dtypes (which TensorFlow installs) is imported
            pass
    return names


_DTYPE_NAMES = _dtype_names()


def _dtype_name(dtype, name):
    """The core's name of `dtype` (a push_pull's, looked up once per dtype: reading a dtype's name costs
    more than the rest of a small push_pull's Python)."""
    known = _DTYPE_NAMES.get(dtype)
    if known is None:
        if not dtype.isnative:  # its name is the native dtype's, its bytes are not
            raise ValueError(f"push_pull of '{name}': the array's byte order ({dtype.str}) is not this machine's; "
                             "pass array.astype(array.dtype.newbyteorder('='))")
        known = dtype.name
        if known not in SUPPORTED_DTYPES:
            raise ValueError(f"push_pull of '{name}': unsupported dtype {known}; "
                             f"supported: {', '.join(SUPPORTED_DTYPES)}")
        _DTYPE_NAMES[dtype] = known
    return known


REDUCE_OPS = ("sum", "min", "max", "product", "weights")


def push_pull_async(array, name, average=True, priority=0, out=None, op="sum", process_set=(), backups=False):
    """Starts reducing `array` across all workers under `name` (the mean, with average=False the sum, or op
    "min", "max", "product" with average=False; op "weights": see above). Returns a Handle.

    `out` may be `array` itself for an in-place result. Higher `priority` goes first. `process_set`: the ranks
    (ascending) that take part, every worker if empty; an average divides by their number. `backups=True`
    (a gradient; floating sums over every worker): with BYTEPS_BACKUP_WORKERS=b each round takes the first
    size() - b workers' arrays, and average=False returns their sum times size() / (size() - b), so that the
    average is their mean (docs/strategy.md, "Backup workers").
    """
    if not isinstance(name, str) or not name:
        raise ValueError("push_pull needs a non-empty string name that is the same on every worker")
    array = np.asarray(array, order="C")  # (ascontiguousarray would turn scalars into 1-d arrays)
    dtype = _dtype_name(array.dtype, name)
    if op not in REDUCE_OPS:
        raise ValueError(f"push_pull of '{name}': op must be one of {', '.join(REDUCE_OPS)}, got {op!r}")
    if average:
        if op != "sum":
            raise ValueError(f"push_pull of '{name}': average=True is a sum divided by the number of workers; "
                             f"op={op!r} needs average=False")
        if dtype.startswith("int"):
            raise ValueError(f"push_pull of '{name}': average=True needs a floating dtype, got {dtype}; "
                             "pass average=False for the sum")
    if out is None:
        output = np.empty_like(array)
    else:
        output = out
        if (output.shape != array.shape or output.dtype != array.dtype or not output.flags.c_contiguous):
            raise ValueError(f"push_pull of '{name}': out must be a C-contiguous array like the input")
        if not output.flags.writeable:
            raise ValueError(f"push_pull of '{name}': out is read-only; pass a writable array (or none)")
    # (None: a plain sum over every worker, what a training step pushes, converted in C++ at no cost.)
    options = (None if op == "sum" and len(process_set) == 0 and not backups
               else (op, [int(r) for r in process_set], bool(backups)))
    handle = _core.push_pull_async(array, output, dtype, name, int(priority), options)
    return Handle(handle, array, output, (len(process_set) or size()) if average else None)


def synchronize(handle):
    """Waits for a push_pull and returns its result (raises on failure, within BYTEPS_TIMEOUT)."""
    _core.wait(handle._handle)
    result = handle.output
    if handle._divisor is not None:
        np.divide(result, handle._divisor, out=result, casting="unsafe")
    return result


def push_pull(array, name, average=True, priority=0, op="sum", process_set=(), backups=False):
    """Returns the mean (with average=False the sum; or op "min", "max", "product", with average=False) of
    `array` across all workers (or the ranks of `process_set`); `backups` as for push_pull_async."""
    return synchronize(push_pull_async(array, name, average=average, priority=priority, op=op,
                                       process_set=process_set, backups=backups))


def barrier(process_set=()):
    """Returns once every worker (of `process_set`, a list of ranks) has called barrier()."""
    name = "barrier" + "".join(f".{r}" for r in process_set)
    push_pull(np.zeros(1, np.int32), name, average=False, process_set=process_set)


def start_timeline(path):
    """Starts writing a Chrome trace of this worker's tensors to `path` (see docs/timeline.md)."""
    _core.start_timeline(str(path))


def stop_timeline():
    """Completes the trace started by start_timeline() or BYTEPS_TRACE_ON."""
    _core.stop_timeline()


def communication_counters():
    """What this process's push_pulls have cost since it started (bps_tf.communication_metrics turns it into
    figures per step): `push_pull_seconds`, wall time with at least one push_pull in flight (on GPUs with its
    local reduction and copies); `wait_seconds`, wall time with at least one of this worker's pushes held by a
    server for the other workers' pushes of the round; `bytes_pushed` and `bytes_pulled`, as they travel
    (encoded by the core's compression, over the network or a server's shared memory on this host);
    `uncompressed_bytes_pushed`, what the same pushes would have been without the core's compression;
    `bytes_pushed_in_place`, of `bytes_pushed`, those a server on this host read where they lay in this
    process's memory, writing the sum there too (TensorFlow's tensors, with jemalloc and bps_tf's router);
    `messages_sent` and `messages_received`, the messages to and from servers that carried them (a message
    holding several small partitions for one server counts once), and `messages_sent_to_server`, the sent ones
    by server index ({index: count}); `late_pushes`, with backup workers (BYTEPS_BACKUP_WORKERS), this worker's
    pushes that came after their round had its contributions: dropped, and answered with the round's sum;
    `rounds_behind`, with backup workers, the fewest, over the partitions of the gradients, of how many more
    rounds their server had completed than the one the newest reply to this worker's push was for (0: on
    time). So many of this worker's next rounds are complete for every gradient: it may skip computing them
    and push anything (it is dropped) to take those rounds' results, as Keras fit under BytePSStrategy does;
    `bytes_kept_after_failure`, the memory of failed push_pulls whose pushes went in place, which a server on
    this host might still have written: held until the next generation of an elastic job forms with the same
    servers, for good after a lost server or scheduler."""
    return _core.communication_counters()


def save_compression_states():
    """This worker's gradient-compression state (momentum, error feedback; the servers' residuals on a
    tensor's first contributor) of every tensor pushed compressed so far, one bytes object per tensor. Taken
    after the push_pulls already started, so call it between steps."""
    return _core.save_compression_states()


def load_compression_states(states):
    """Puts states from save_compression_states() back, before the tensors' next push_pulls. Collective for
    tensors not pushed yet in this job (their first use declares them): every worker loads at once."""
    _core.load_compression_states(list(states))

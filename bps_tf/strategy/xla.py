"""XLA under BytePSStrategy. Inside a computation compiled with XLA (Keras's `jit_compile`,
`tf.function(jit_compile=True)`), each push_pull becomes two XLA custom calls that the engine serves: one
starts it as soon as the gradient exists, the other waits for the sum just before its first use. So a
replica's whole step (forward and backward pass, the reduction, the optimizer's update) is one compiled
computation, as on a single device, and gradients still travel while the backward pass goes on.

What stays outside XLA is refused when the step is traced, with what to do instead:
- several devices in one process: XLA compiles each GPU's replica on its own and cannot reach variables on
  other devices, so one process's replicas cannot be summed together before the servers; run one process
  per GPU (`bpslaunch --local-size N`).
- on GPUs, the core's gradient compression (onebit, topk, randomk; fp16 is a cast inside the computation
  and runs), min/max/product reductions, process sets and asynchronous training's weights (the core runs
  them on CPU tensors); sparse gradients are reduced dense inside XLA.
- all_gather (Keras's predict gathers outside the compiled step, so it is not affected).
"""

import functools
import weakref

import tensorflow as tf

from bps_tf import compat
from bps_tf.ops import build_info
from bps_tf.ops.batched import compiling
from bps_tf.ops.compression import wire_codec

_call_for_each_replica = compat.target("mirrored_run.call_for_each_replica")
_Function = compat.target("Function")

ONE_DEVICE_PER_PROCESS = (
    "BytePSStrategy under XLA (jit_compile) needs one device per process: XLA compiles each replica for its "
    "own device, so this process's replicas cannot be summed before the servers. Start one process per GPU "
    "(bpslaunch --local-size N; BytePSStrategy then takes the GPU of its local rank), or compile with "
    "jit_compile=False.")


def active():
    """True while tracing a computation that XLA compiles."""
    return compiling()


def available():
    """True if this op library lowers push_pull to XLA (built against a TensorFlow that exports XLA's FFI)."""
    return "xla" in build_info()


def refuse(what):
    raise ValueError(f"BytePSStrategy cannot {what} inside a computation compiled with XLA; compile it with "
                     "jit_compile=False")


def check_reduction(groups, compression):
    """Raises, saying what to do, if these local values cannot be reduced inside XLA (see the module)."""
    if not available():
        raise ValueError("this build of bps_tf's op library cannot reduce inside XLA (it was built against a "
                         "TensorFlow without XLA's FFI custom calls); compile with jit_compile=False, or rebuild "
                         "it against TensorFlow 2.21 (scripts/build_ops.sh)")
    if any(len(g) > 1 for g in groups):
        raise ValueError(ONE_DEVICE_PER_PROCESS)
    on_gpu = any("GPU" in (t.device or "").upper() for g in groups for t in g)
    if on_gpu and wire_codec(compression) is not None:
        raise ValueError("BytePSStrategy under XLA on GPUs sends gradients uncompressed (the core compresses CPU "
                         "tensors): drop compression= / BYTEPS_COMPRESSION, or compile with jit_compile=False")


def runs_on_one_gpu(strategy):
    """True if this process's replica is one GPU: where jit_compile="auto" compiles with XLA."""
    devices = strategy.extended.worker_devices
    return len(devices) == 1 and "GPU" in devices[0].upper() and available()


def sums_together(groups, compression):
    """True if these local values (checked by check_reduction) are summed as one batch inside XLA: every
    sum starts before any is waited for. Tensors the core's codecs encode go one by one (it encodes CPU
    tensors); fp16 casts within the batch."""
    return active() and not any(wire_codec(compression) is not None and wire_codec(compression).applies_to(g[0])
                                for g in groups)


class ReplicaLoops:
    """Replica functions compiled with XLA, each with the replica loop inside it: merge_call, the reductions
    and the updates are then part of the one compiled computation. TensorFlow does this on CPUs; on GPUs it
    compiles each replica apart and reduces with collectives only XLA's own runtime knows. With one GPU per
    process both are the same computation."""

    def __init__(self, strategy):
        available()  # asked once here, outside any trace
        self._strategy = weakref.ref(strategy)
        self._compiled = weakref.WeakKeyDictionary()  # the user's function -> its loop, compiled

    @staticmethod
    def applies_to(fn):
        return isinstance(fn, _Function) and bool(fn._jit_compile)

    def call(self, fn, args, kwargs, devices):
        if len(devices) > 1:
            raise ValueError(ONE_DEVICE_PER_PROCESS)
        loop = self._compiled.get(fn)
        if loop is None:
            strategy = self._strategy()
            loop = fn._clone(python_function=functools.partial(_run_replicas, strategy, fn.python_function))
            self._compiled[fn] = loop
        return loop(*(args or ()), **(kwargs or {}))


def _run_replicas(strategy, python_function, *args, **kwargs):
    return _call_for_each_replica(strategy, python_function, args, kwargs)

"""A worker's step in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS; docs/strategy.md,
"Training with stragglers"): the servers hold the weights. The worker applies its optimizer to its own
gradients, pushes the change of each variable (after - before) and assigns the servers' weights, which the
reply carries; it waits for no other worker (with a staleness bound, for the slowest when too far ahead).

Each variable is one tensor on the servers, named after its place in the list. The first push of a name in a
generation initialises it (the first worker's to arrive; after the initial broadcast every worker holds the
same weights), so the first step also pushes the weights before the optimizer runs. Used by the
Horovod-compatible API and by BytePSStrategy alike.
"""

import weakref

import tensorflow as tf

from bps_tf import process
from bps_tf.ops.batched import compiling
from bps_tf.ops.collectives import push_pull_weights
from bps_tf.ops.compression import Compression
from bps_tf.ops.variable_keys import held_variable

# Everything that keeps variables on the servers (WeightSync, a tape's pending changes, BytePSStrategy's
# server weights), in creation order, which is the same on every worker: synchronize_weights() pushes in it.
_holders = []


def hold(holder):
    """Registers `holder` (kept weakly): its servers_forgot() runs when a generation of the job starts, its
    push_pending() and pull() (eager) in synchronize_weights()."""
    _holders.append(weakref.ref(holder))


def every_holder():
    live = [(reference, reference()) for reference in _holders]
    _holders[:] = [reference for reference, holder in live if holder is not None]
    return [holder for _, holder in live if holder is not None]


def _servers_forgot():
    # A new generation: the servers start without weights, so every name is initialised again.
    for holder in every_holder():
        holder.servers_forgot()


process.on_generation_start(_servers_forgot)


def as_flag_says(flag, if_set, otherwise):
    """Runs one of two functions, as the boolean variable `flag` says when the step runs (a cond in a
    function)."""
    if tf.executing_eagerly():
        (if_set if bool(flag.numpy()) else otherwise)()
        return

    def then(fn):
        def branch():
            fn()
            return tf.constant(True)  # (a cond branch must return a tensor)
        return branch

    tf.cond(flag, then(if_set), then(otherwise))


def refuse_gpu_variables_under_xla(variables, what):
    """The weights op runs on CPU tensors, outside XLA: a step compiled with XLA on a GPU cannot push."""
    if compiling() and any("GPU" in (held_variable(v).device or "").upper() for v in variables):
        raise ValueError(f"{what} cannot push weights from inside a function compiled with XLA on a GPU in "
                         "asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS): compile it with "
                         "jit_compile=False")


def check_async_compression(compression, what):
    """Compression is for gradients that are summed; asynchronous training sends weight changes."""
    if compression is not None and compression is not Compression.none:
        raise ValueError(f"{what}: gradient compression is not offered with asynchronous training "
                         "(BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS): leave compression=bps.Compression.none")


class WeightSync:
    """Pushes the changes a local optimizer step makes to a list of variables and assigns the servers'
    weights. `scope` names the tensors (one scope per optimizer or model)."""

    def __init__(self, scope):
        self._scope = scope
        with tf.init_scope():
            self._initialised = tf.Variable(False, trainable=False, name="bps_async_initialised")
        self._last = ([], [])  # the variables of the last step, and their names
        hold(self)

    def servers_forgot(self):
        self._initialised.assign(False)

    def push_pending(self):
        """Nothing is pending: each step pushed its change."""

    def pull(self):
        """Assigns the servers' weights to the variables of the last step (pushes no change)."""
        variables, names = self._last
        if variables and bool(self._initialised.numpy()):
            self._pull_into(variables, [tf.zeros_like(v) for v in variables], names)

    def _names(self, variables):
        labels = [getattr(v, "path", None) or getattr(v, "name", None) or "variable" for v in variables]
        return [f"{self._scope}.async/{i}.{label}" for i, label in enumerate(labels)]

    def _pull_into(self, variables, values, names):
        count = len(variables)
        assigned = []
        for i, (variable, value, name) in enumerate(zip(variables, values, names)):
            weights = push_pull_weights(value, name, priority=count - i)
            assigned.append(variable.assign(weights))
        return assigned

    def _initialise(self, variables, names):
        def send_weights():
            with tf.control_dependencies(self._pull_into(variables, [tf.identity(v) for v in variables], names)):
                return self._initialised.assign(True).read_value()  # (a cond branch must return a tensor)

        if tf.executing_eagerly():
            if not bool(self._initialised.numpy()):
                send_weights()
            return
        tf.cond(self._initialised, lambda: tf.constant(True), send_weights)

    def step(self, variables, apply):
        """Runs `apply()` (the local optimizer step on `variables`) between reading each variable and pushing
        its change; returns what `apply()` returned."""
        variables = list(variables)
        refuse_gpu_variables_under_xla(variables, "DistributedOptimizer")
        names = self._names(variables)
        self._last = (variables, names)
        self._initialise(variables, names)
        before = [tf.identity(v) for v in variables]
        with tf.control_dependencies(before):
            result = apply()
        deps = [] if result is None or not tf.is_tensor(result) else [result]
        with tf.control_dependencies(deps):
            changes = [tf.identity(v) - old for v, old in zip(variables, before)]
        self._pull_into(variables, changes, names)
        return result

"""A worker's step in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS; docs/strategy.md,
"Training with stragglers"): the servers hold the weights. The worker applies its optimizer to its own
gradients, pushes the change of each variable (after - before) and assigns the servers' weights, which the
reply carries; it waits for no other worker (with a staleness bound, for the slowest when too far ahead).

Each variable is one tensor on the servers, named after the optimizer and the order its steps met the
variables in. The first push of a name in a generation initialises it (the first worker's to arrive; after
the initial broadcast every worker holds the same weights), so a variable's first step also pushes its
weights before the optimizer runs. This module also holds what every asynchronous API shares: the registry
that synchronize_weights() and a new generation go through, the per-variable flag, and the refusals.
"""

import gc
import weakref

import tensorflow as tf

from bps_tf import compat, process
from bps_tf.ops.batched import compiling
from bps_tf.ops.collectives import push_pull_weights
from bps_tf.ops.compression import Compression
from bps_tf.ops.variable_keys import held_variable, variable_key

_ResourceVariable = compat.target("ResourceVariable")

# Everything that keeps variables on the servers (WeightSync, a tape's pending changes, BytePSStrategy's
# server weights), in creation order, which is the same on every worker: synchronize_weights() pushes in it.
_holders = []


def hold(holder):
    """Registers `holder` (kept weakly): its servers_forgot() runs when a generation of the job starts, its
    push_pending() and pull() (eager) in synchronize_weights()."""
    _holders.append(weakref.ref(holder))


def every_holder():
    if not _holders:
        return []  # (synchronous training: no collection at each new generation)
    gc.collect()  # a holder dropped in a reference cycle goes now on every worker alike, not at the next collection
    live = [(reference, reference()) for reference in _holders]
    _holders[:] = [reference for reference, holder in live if holder is not None]
    return [holder for _, holder in live if holder is not None]


def _servers_forgot():
    # A new generation: the servers start without weights, so every name is initialised again.
    for holder in every_holder():
        holder.servers_forgot()


process.on_generation_start(_servers_forgot)


# Which API pushes each variable's changes (variable_key -> its name): two would push every change twice.
_claims = {}


def claim(variable, what):
    """Records that `what` (DistributedOptimizer, DistributedGradientTape, BytePSStrategy) pushes the changes of
    `variable`; refuses a variable another of them pushes already."""
    other = _claims.setdefault(variable_key(variable), what)
    if other != what:
        name = getattr(variable, "path", None) or getattr(variable, "name", None)
        raise ValueError(f"asynchronous training: variable '{name}' is trained by both {other} and {what}, and "
                         "each pushes the change of every step, so the servers would add it twice: use a plain "
                         "tf.GradientTape with bps.DistributedOptimizer, or bps.DistributedGradientTape with a "
                         "plain optimizer")


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


class OnServers:
    """One variable's tensor on the servers: its name, and a flag, pushed in this generation of the job (a
    variable on the CPU, read when a step runs, so that a function traced in one generation initialises the
    servers in the next). Made directly (not through tf.Variable): a variable may be met in a function's
    later trace."""

    def __init__(self, variable, name):
        self.variable = variable
        self.name = name
        with tf.init_scope(), tf.device("/cpu:0"):
            self.pushed = _ResourceVariable(False, trainable=False, name="bps_pushed")

    def push(self, value, priority=0):
        """Pushes `value` (the weights, first in a generation; then a change) and takes the servers' weights;
        returns the assignment. A variable's pushes are ordered by its reads and assignments."""
        return self.take(push_pull_weights(value, self.name, priority=priority, ordered=True))

    def take(self, weights):
        return self.variable.assign(weights)

    def initialise(self, priority=0):
        # The flag is set once the push succeeded: after a failed one the next is still the initial push.
        with tf.control_dependencies([self.push(tf.convert_to_tensor(self.variable), priority)]):
            return self.pushed.assign(True)

    def initialise_unless_pushed(self, priority=0):
        as_flag_says(self.pushed, lambda: None, lambda: self.initialise(priority))

    def pull(self):
        """Eagerly: assigns the servers' weights (pushes no change) if pushed in this generation."""
        if bool(self.pushed.numpy()):
            self.push(tf.zeros(self.variable.shape, self.variable.dtype))


class WeightSync:
    """Pushes the changes a local optimizer step makes to its variables and assigns the servers' weights.
    `scope` names the tensors (one scope per optimizer)."""

    def __init__(self, scope):
        self._scope = scope
        self._variables = {}  # variable_key -> OnServers, in the order met
        hold(self)

    def servers_forgot(self):
        for variable in self._variables.values():
            variable.pushed.assign(False)

    def push_pending(self):
        """Nothing is pending: each step pushed its change."""

    def pull(self):
        for variable in self._variables.values():
            variable.pull()

    def _on_servers(self, variable):
        key = variable_key(variable)
        if key not in self._variables:
            claim(variable, "DistributedOptimizer")
            label = getattr(variable, "path", None) or getattr(variable, "name", None) or "variable"
            self._variables[key] = OnServers(variable, f"{self._scope}.async/{len(self._variables)}.{label}")
        return self._variables[key]

    def step(self, variables, apply):
        """Runs `apply()` (the local optimizer step on `variables`) between reading each variable and pushing
        its change; returns what `apply()` returned."""
        variables = list(variables)
        refuse_gpu_variables_under_xla(variables, "DistributedOptimizer")
        on_servers = [self._on_servers(v) for v in variables]
        count = len(on_servers)
        for i, variable in enumerate(on_servers):
            variable.initialise_unless_pushed(priority=count - i)
        before = [tf.identity(v) for v in variables]
        with tf.control_dependencies(before):
            result = apply()
        deps = [] if result is None or not tf.is_tensor(result) else [result]
        with tf.control_dependencies(deps):
            changes = [tf.identity(v) - old for v, old in zip(variables, before)]
        for i, (variable, change) in enumerate(zip(on_servers, changes)):
            variable.push(change, priority=count - i)
        return result

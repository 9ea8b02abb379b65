"""BytePSStrategy in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS; docs/strategy.md, "Training
with stragglers"): the servers hold the trainable variables. Gradients are not reduced across workers (each
worker's optimizer applies its own); every update of a trainable variable pushes the change it made and
assigns the servers' weights to the variable's local copies.

Each trainable variable is one tensor on the servers, named after the variable and how many of that name the
process's strategies created before (the same on every worker). Its first update in a generation of the job
pushes the variable's weights first (the servers take the first worker's to arrive as the initial weights;
every worker starts from worker 0's initial values, or from the state bps_tf.elastic synchronised), then its
change. A first push is a collective (every worker declares the tensor), so it is made only in an update,
which every worker runs alike, never when a generation starts: a worker that joins an elastic job may be
elsewhere then.
Whether a variable was pushed in this generation is a flag variable beside it (not mirrored: one value for
the process) that the training function reads when it runs, so that a function traced in one generation
still initialises the servers in the next.
"""

import collections

import tensorflow as tf

from bps_tf import compat, process
from bps_tf.elastic import generations
from bps_tf.ops import async_weights
from bps_tf.ops.collectives import push_pull_weights
from bps_tf.strategy import xla

_ResourceVariable = compat.target("ResourceVariable")
# Variables of each name made so far by every strategy of the process (every worker makes them alike): two
# strategies' variables of one name are two tensors on the servers.
_created = collections.Counter()


class ServerWeights:
    def __init__(self):
        self._names = {}  # id(variable) -> its tensor's name
        self._pushed = {}  # id(variable) -> its flag: pushed in this generation
        self._variables = []  # keeps them alive (and their ids unique), in creation order
        async_weights.hold(self)

    def created(self, variable):
        """A variable the strategy just created: a trainable one is held by the servers from its first update."""
        if not getattr(variable, "trainable", False):
            return
        async_weights.claim(variable, "BytePSStrategy")
        base = variable.name.split(":")[0]
        name = f"strategy.weights.{base}.{_created[base]}"
        _created[base] += 1
        self._names[id(variable)] = name
        with tf.init_scope(), tf.device("/cpu:0"):
            self._pushed[id(variable)] = _ResourceVariable(False, trainable=False, name=f"{base}/bps_pushed")
        self._variables.append(variable)

    def update(self, variable, apply, assignment=False):
        """Runs `apply()` (the optimizer's update of `variable`'s local copies), then pushes the change and
        assigns the servers' weights. Inside a tf.function the reads, the update and the assignments keep this
        order by TensorFlow's automatic control dependencies (they use one variable).

        An `assignment` (restoring a checkpoint, set_weights, a broadcast) is made by every worker alike: of a
        variable not pushed in this generation yet, it pushes nothing (the first update sends the assigned
        weights); otherwise worker 0 pushes its change and takes the servers' weights, every other worker
        pushes no change (so that the workers' clocks of bounded staleness stay together) and keeps the value
        it assigned."""
        name = self._names.get(id(variable))
        if name is None:
            return apply()
        if xla.active() and any("GPU" in (c.device or "").upper() for c in variable.values):
            xla.refuse("train asynchronously (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS) with variables on a GPU")
        if assignment:
            return self._assign(variable, apply, name)
        self._unless_pushed(variable, lambda: self._initialise(variable, name))
        before = tf.identity(variable.values[0])
        result = apply()
        self._pull(variable, tf.identity(variable.values[0]) - before, name)
        return result

    def _assign(self, variable, apply, name):
        if not self._pushes_assignments():
            return apply()
        before = tf.identity(variable.values[0])
        result = apply()

        def push_change():
            if process.rank() == 0:
                self._pull(variable, tf.identity(variable.values[0]) - before, name)
            else:
                push_pull_weights(tf.zeros_like(before), name, ordered=True)

        self._if_pushed(variable, push_change)
        return result

    @staticmethod
    def _pushes_assignments():
        """False in an elastic job whose workers changed (restoring the last commit into the broken
        generation) or that trains alone before its sync."""
        return not (process.is_elastic() and (generations.membership_changed() or generations.collectives_are_local()))

    def _initialise(self, variable, name):
        # The flag is set once the push succeeded: after a failed one the next is still the initial push.
        with tf.control_dependencies(self._pull(variable, tf.identity(variable.values[0]), name)):
            self._pushed[id(variable)].assign(True)

    def servers_forgot(self):
        for flag in self._pushed.values():
            flag.assign(False)

    def push_pending(self):
        """Nothing is pending: each update pushed its change."""

    def pull(self):
        """Assigns the servers' weights to every variable pushed in this generation (pushes no change)."""
        for variable in self._variables:
            if bool(self._pushed[id(variable)].numpy()):
                self._pull(variable, tf.zeros_like(variable.values[0]), self._names[id(variable)])

    def _unless_pushed(self, variable, fn):
        self._branch(variable, if_pushed=lambda: None, otherwise=fn)

    def _if_pushed(self, variable, fn):
        self._branch(variable, if_pushed=fn, otherwise=lambda: None)

    def _branch(self, variable, if_pushed, otherwise):
        async_weights.as_flag_says(self._pushed[id(variable)], if_pushed, otherwise)

    @staticmethod
    def _pull(variable, value, name):
        """Pushes `value`, assigns the servers' weights to every local copy; returns the assignments. A
        variable's pushes are ordered by its reads and assignments: an optimizer may update it twice a step."""
        weights = push_pull_weights(value, name, ordered=True)
        assignments = []
        for component in variable.values:
            with tf.device(component.device):
                assignments.append(component.assign(weights))
        return assignments

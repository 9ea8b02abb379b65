"""Broadcasting variables from one worker to all."""

import tensorflow as tf

from bps_tf.ops.collectives import broadcast
from bps_tf.ops.pending_changes import moved
from bps_tf.ops.together import function_of_its_own


def _variable_name(variable, index):
    return f"{index}.{getattr(variable, 'path', None) or variable.name}"


def broadcast_variables(variables, root_rank, name="variables", process_set=None):
    """Sets every variable to its value on `root_rank`. In graph mode (TF1), returns the op that does it;
    eagerly, the broadcasts run in one function, all in flight together."""
    variables = list(variables)

    def assign(variable, index):
        # (In asynchronous training a tape's variable keeps its own change to push: pending_changes.py.)
        return moved(variable, lambda: variable.assign(
            broadcast(variable, root_rank, name=f"{name}/{_variable_name(variable, index)}", process_set=process_set)))

    def assign_all():
        return tf.group(*[assign(v, i) for i, v in enumerate(variables)])

    if not tf.executing_eagerly():
        return assign_all()
    if variables:
        function_of_its_own(lambda: [assign_all()][:0])()  # (a tf.function returns no Operation)
    return None

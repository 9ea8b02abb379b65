"""Broadcasting variables from one worker to all."""

import tensorflow as tf

from bps_tf.ops.collectives import broadcast
from bps_tf.ops.together import function_of_its_own


def _variable_name(variable, index):
    return f"{index}.{getattr(variable, 'path', None) or variable.name}"


def broadcast_variables(variables, root_rank, name="variables", process_set=None):
    """Sets every variable to its value on `root_rank`. In graph mode (TF1), returns the op that does it;
    eagerly, the broadcasts run in one function, all in flight together."""
    variables = list(variables)

    def assign_all():
        assigns = [v.assign(broadcast(v, root_rank, name=f"{name}/{_variable_name(v, i)}", process_set=process_set))
                   for i, v in enumerate(variables)]
        return tf.group(*assigns)

    if not tf.executing_eagerly():
        return assign_all()
    if variables:
        function_of_its_own(lambda: [assign_all()][:0])()  # (a tf.function returns no Operation)
    return None

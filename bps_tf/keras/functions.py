"""horovod.tensorflow.keras's functions on tensor-compatible values (NumPy arrays, lists, tensors), and
load_model, which wraps the loaded optimizer in a DistributedOptimizer."""

import tensorflow as tf

from bps_tf import compat
from bps_tf.ops import Average, Compression, shape_agreement
from bps_tf.tensorflow import collectives, functions
from bps_tf.tensorflow.optimizer import DistributedOptimizer


def _name(name, kind):
    # One name for every call of this kind serves a loop; values of another shape need their own name.
    return name or f"keras.{kind}"


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=Compression.none):
    """`value` reduced across workers (Average unless op= says otherwise), as a tensor."""
    tensor = tf.convert_to_tensor(value)
    if tf.executing_eagerly() and shape_agreement.needs_check(tensor):
        # The name holds the shape: workers whose shapes differ would wait for each other.
        shape_agreement.check([tensor], _name(name, "allreduce"), "allreduce", shape_agreement.HOROVOD_REMEDY)
    return collectives.allreduce(tensor, average=average, compression=compression, op=op,
                                 prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                                 name=f"{_name(name, 'allreduce')}.{tensor.dtype.name}{tensor.shape}",
                                 ignore_name_scope=True)


def allgather(value, name=None):
    """Every worker's `value` concatenated along the first dimension, as a tensor."""
    tensor = tf.convert_to_tensor(value)
    return collectives.allgather(tensor, name=f"{_name(name, 'allgather')}.{tensor.dtype.name}", ignore_name_scope=True)


def broadcast(value, root_rank, name=None):
    """`value` as it is on `root_rank`, as a tensor."""
    tensor = tf.convert_to_tensor(value)
    return collectives.broadcast(tensor, root_rank, name=f"{_name(name, 'broadcast')}.{tensor.dtype.name}{tensor.shape}")


def reducescatter(value, name=None, op=Average):
    """`value` reduced across workers, each keeping its part of the first dimension, as a tensor."""
    tensor = tf.convert_to_tensor(value)
    return collectives.reducescatter(tensor, op=op, name=f"{_name(name, 'reducescatter')}.{tensor.dtype.name}{tensor.shape}",
                                     ignore_name_scope=True)


def broadcast_global_variables(root_rank):
    """TF1 graphs only, as in Horovod: every global variable set to its value on `root_rank`."""
    return functions.broadcast_global_variables(root_rank)


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=Compression.none, legacy_opts=False):
    """Loads a Keras model saved by model.save() and wraps its optimizer (with its state) in a
    DistributedOptimizer, so that training resumes across workers. `custom_optimizers` (classes) and
    `custom_objects` are passed to Keras; `legacy_opts` is accepted (the loaded optimizer is wrapped
    whatever its kind)."""
    del legacy_opts
    objects = dict(custom_objects or {})
    for optimizer_class in custom_optimizers or ():
        objects.setdefault(optimizer_class.__name__, optimizer_class)
    if compat.keras_in_use() == "tf_keras":
        keras = compat.keras2()
    else:
        import keras
    model = keras.models.load_model(filepath, custom_objects=objects)
    if getattr(model, "optimizer", None) is not None and not getattr(model.optimizer, "_bps_wrapped", False):
        DistributedOptimizer(model.optimizer, compression=compression)  # wraps it in place
    return model

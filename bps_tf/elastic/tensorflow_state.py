"""The states of Horovod's elastic TensorFlow API (horovod.tensorflow.elastic): of a Keras model and its
optimizer (TensorFlowKerasState) or of a list of variables (TensorFlowState). Works with Keras 3 and tf-keras
models, and under BytePSStrategy (docs/elastic.md)."""

import tensorflow as tf

from bps_tf.elastic.state import ObjectState
from bps_tf.objects import broadcast_object
from bps_tf.ops import broadcast_variables
from bps_tf.process import rank


def _optimizer_variables(optimizer):
    """Keras 3's and the new tf-keras optimizers' `variables` is a list; tf-keras's OptimizerV2 a method."""
    if optimizer is None:
        return []
    variables = getattr(optimizer, "variables", [])
    return list(variables() if callable(variables) else variables)


def _build_optimizer(optimizer, model):
    """An optimizer that has not made its slots yet makes them now, so every worker broadcasts the same list
    (a worker that joins has not trained). Keras 3 says so in `built`; tf-keras's optimizers set `_built`
    only once built; its legacy optimizers have no build()."""
    if optimizer is None or not hasattr(optimizer, "build"):
        return
    built = getattr(optimizer, "built", None)
    if built is None:
        built = getattr(optimizer, "_built", False)
    if built:
        return
    # Its variables belong to the model's strategy (Keras 3 refuses to make them outside its scope).
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None or tf.distribute.get_strategy() is strategy:
        optimizer.build(model.trainable_variables)
        return
    with strategy.scope():
        optimizer.build(model.trainable_variables)


def _model_built(model):
    return model.built if hasattr(model, "build") else True


def _snapshot(variables):
    """(variable, a copy of its value in host memory) for each variable."""
    return [(variable, variable.numpy()) for variable in variables]


def _assign(snapshot):
    for variable, value in snapshot:
        variable.assign(value)


class TensorFlowKerasState(ObjectState):
    """The state of a Keras model and its optimizer (by default the model's), plus the Python attributes
    given as keyword arguments. The model must be built. `backend` is accepted (TF1 sessions: not offered,
    variables are read eagerly)."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        if not _model_built(model):
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        _assign(self._saved_model_state)
        _assign(self._saved_optimizer_state)
        super().restore()

    def sync(self):
        _build_optimizer(self.optimizer, self.model)
        broadcast_variables(self.model.variables, root_rank=0, name="elastic.model")
        broadcast_variables(_optimizer_variables(self.optimizer), root_rank=0, name="elastic.optimizer")
        self._save_model()
        super().sync()

    def _save_model(self):
        self._saved_model_state = _snapshot(self.model.variables)
        self._saved_optimizer_state = _snapshot(_optimizer_variables(self.optimizer))


class TensorFlowState(ObjectState):
    """The state of a list of TensorFlow variables (eager TensorFlow 2; default: none given is an error, as
    TF2 has no global collection), plus the Python attributes given as keyword arguments."""

    def __init__(self, variables=None, session=None, **kwargs):
        if variables is None:
            if tf.executing_eagerly():
                raise ValueError("TensorFlowState needs its variables in eager TensorFlow: TensorFlowState(variables)")
            variables = tf.compat.v1.global_variables()
        if session is not None or not tf.executing_eagerly():
            raise ValueError("TensorFlowState runs eagerly (TensorFlow 2); TF1 sessions are not offered")
        self.variables = list(variables)
        self.session = session
        self._values = _snapshot(self.variables)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)

    def save(self):
        self._values = _snapshot(self.variables)
        super().save()

    def restore(self):
        _assign(self._values)
        super().restore()

    def sync(self):
        broadcast_variables(self.variables, root_rank=0, name="elastic.variables")
        self._values = _snapshot(self.variables)
        super().sync()


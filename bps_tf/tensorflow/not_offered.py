"""Horovod names bps_tf does not offer: using one is an error that says so and what to do instead, never an
AttributeError deep in user code."""

_REASONS = {
    "mpi_ops": "bps_tf has no MPI layer; its collectives are the functions of bps_tf.tensorflow itself",
    "check_num_rank_power_of_2": "this Adasum helper is not offered: bps_tf has no Adasum",
    "LocalGradientAggregationHelper": "internal to Horovod; use DistributedOptimizer(backward_passes_per_step=N)",
    "handle_average_backwards_compatibility": "internal to Horovod; pass op= to the collectives",
}


class NotOfferedError(NotImplementedError, AttributeError):
    """A Horovod name that bps_tf does not offer (an AttributeError too, so hasattr() answers False)."""


def not_offered(module, name):
    """Raises for `module`.`name`: NotOfferedError for Horovod's names, AttributeError for any other."""
    if name in _REASONS:
        raise NotOfferedError(f"{module}.{name}: {_REASONS[name]}")
    raise AttributeError(f"module '{module}' has no attribute '{name}'")

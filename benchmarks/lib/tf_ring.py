"""TensorFlow's own all-reduce, as a TF user would get it: MultiWorkerMirroredStrategy with the RING
collective implementation (gRPC between workers), configured through TF_CONFIG."""

import json
import os


def set_tf_config(cluster, index):
    """cluster: ["host:port", ...], one TF gRPC server per worker; index: this worker's place in it.

    Must be set before TensorFlow builds the strategy (it reads TF_CONFIG once)."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": list(cluster)},
                                          "task": {"type": "worker", "index": int(index)}})


def ring_strategy(cluster, index):
    """A MultiWorkerMirroredStrategy whose all-reduces use TF's RING collectives."""
    set_tf_config(cluster, index)
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def ring_all_reduce(strategy):
    """A function tensor -> sum of that tensor over all workers, through the strategy's collectives."""
    import tensorflow as tf

    def replica_fn(tensor):
        # identity places the value on this replica's device: an unplaced input has no destination.
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(tensor))

    @tf.function(autograph=False)
    def all_reduce(tensor):
        return strategy.experimental_local_results(strategy.run(replica_fn, args=(tensor,)))[0]

    return all_reduce

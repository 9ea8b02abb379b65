"""tf.estimator with RunConfig(train_distribute=BytePSStrategy()) is refused on every worker with an error that
names the way estimators are trained with bps_tf (TensorFlow 2.15)."""

import numpy as np
import tensorflow as tf

import bps_tf
from bps_tf import BytePSStrategy


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main():
    strategy = BytePSStrategy()
    estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=strategy))
    data = (np.ones((4, 3), np.float32), np.zeros(4, np.int64))
    try:
        estimator.train(lambda: tf.data.Dataset.from_tensors(data).repeat(), steps=2)
    except NotImplementedError as error:
        assert "DistributedOptimizer" in str(error) and "BroadcastGlobalVariablesHook" in str(error), error
        print(f"rank {bps_tf.rank()}: train_distribute refused", flush=True)
    else:
        raise AssertionError("the estimator trained under BytePSStrategy")
    bps_tf.shutdown()


if __name__ == "__main__":
    main()

"""What the benchmark commands share: the emulated cluster (netns) and the bps_tf jobs on it (cluster_job),
starting processes (processes), timing and bounds (measure), result files (results), TensorFlow's RING
all-reduce to compare with (tf_ring), the models (models, digits) and the training runs (train_runs)."""

"""What the benchmark commands share: the emulated cluster (netns) and the bps_tf jobs on it (cluster_job),
starting processes (processes), timing and bounds (measure), result files (results), TensorFlow's RING
all-reduce to compare with (tf_ring), the models' sizes and data (models, digits; built by testing.models),
the training runs (train_runs), and the parts of the elastic recovery benchmark (elastic_launchers,
elastic_run, elastic_events, elastic_analysis)."""

"""Single-process experiments that explain a result of the benchmarks (not comparisons with TensorFlow)."""

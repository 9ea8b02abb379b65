"""What bps_tf's tests (tests/), its reliability cases (tests/reliability/) and its benchmarks (benchmarks/)
share, kept out of the bps_tf package and its wheel:

- jobs: the environment of the processes they start (clean_env), free ports, `bpslaunch --local` jobs and
  jobs whose roles are started one by one (ManualJob);
- wire and attacks: bps_tf's wire protocol spoken from Python, and the traffic of strangers and lying
  members of a job;
- agreement and worker_setup: what the test workers (tests/workers/) share;
- digits and models: the data and Keras models that test workers and benchmarks train.
- fake_mps: a stand-in for NVIDIA's MPS control program, for the tests of `bpslaunch --mps`.

Imported as `testing.<module>` with the checkout's root on the path: pytest's `pythonpath` setting
(pyproject.toml), `python -m` from the root, and PYTHONPATH in the processes they start (clean_env).
"""

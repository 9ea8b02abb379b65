"""Test layout: tests/unit holds single-process tests (no job, no network); tests/multiprocess runs real jobs
(bpslaunch over bps_tf's own authenticated TCP transport on loopback, UCX where a test asks for
BYTEPS_TRANSPORT=ucx, real TensorFlow training); tests/workers holds the scripts those jobs run;
tests/reliability the cases of docs/reliability.md. What they share is the `testing` package at the
checkout's root, which pytest puts on the path (pyproject.toml, `pythonpath`)."""

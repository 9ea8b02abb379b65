"""The reliability cases of docs/reliability.md: bad input, bad environment, faults and attacks, each run
for real (processes, loopback TCP) and timed. `python -m tests.reliability docs/reliability.md` (from the
checkout's root) runs them all and rewrites the page's table."""

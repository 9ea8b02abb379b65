"""The reliability cases of docs/reliability.md: bad input, bad environment, faults and attacks, each run
for real (processes, loopback TCP) and timed. `python -m reliability docs/reliability.md` runs them all and
rewrites the page's table."""

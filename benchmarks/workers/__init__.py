"""The scripts the benchmarks' jobs run in each worker process (`python -m benchmarks.workers.<name>`, started
by the commands one level up), and link_check, which measures a link's raw TCP goodput in the same run."""

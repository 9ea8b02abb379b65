"""Messages per step with and without fusion of small pushes (BYTEPS_FUSION), against the planner's count.

python -m benchmarks.fused_messages --runs 3

2 workers and 2 servers on loopback over bps_tf's TCP transport with shared memory off (shared-memory pushes
are never fused), the BERT-like model's gradients (benchmarks/lib/step_model_fit.py, 12 layers) through the
NumPy API (workers/fused_messages.py): all 196 of them, then only the 123 under 256 KB. Each run alternates
fusion off and on. Prints a JSON line per worker and run, and the planner's count (bps_tf/plan/partitions.py:
one message per partition unfused, a group of small tensors as one fused).
"""

import argparse
import json
import sys

from benchmarks.lib.step_model_fit import bert_like_tensors
from bps_tf.plan.partitions import plan
from testing.jobs import REPO_ROOT, run_local

WORKER = REPO_ROOT / "benchmarks" / "workers" / "fused_messages.py"  # absolute: run_local takes it as it is


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    for which in ("all", "small"):
        tensors = [b for b in bert_like_tensors(layers=12) if which == "all" or b < 262144]
        planned = plan(tensors, 2, 4096000)
        print(json.dumps({"tensors": which, "planner": {"unfused": planned.units, "fused": planned.messages}}))
        for run in range(args.runs):
            for fusion in (0, 1):
                done = run_local(WORKER, 2, 2, which, args.steps, BYTEPS_SHARED_MEMORY=0, BYTEPS_FUSION=fusion)
                if done.returncode != 0:
                    sys.exit(f"the job failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
                for line in done.stdout.splitlines():
                    if "{" in line and line.rstrip().endswith("}"):
                        result = json.loads(line[line.index("{"):])
                        print(json.dumps({"tensors": which, "run": run, "fusion": fusion, **result}), flush=True)


if __name__ == "__main__":
    main()

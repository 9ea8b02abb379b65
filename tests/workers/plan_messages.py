"""push_pulls a model-like set of float32 gradients (all in flight at once, as a backward pass starts them) for a
few steps, checking every sum exactly, and writes the messages this worker sent to each server and received per
step after the first (which declares the tensors). Usage: plan_messages.py OUT_JSON ELEMENTS_JSON STEPS."""

import json
import sys
from pathlib import Path

import numpy as np

import bps_tf.numpy as bps


def step(elements, rank, size, number):
    handles = []
    for index, count in enumerate(elements):
        value = np.full(count, rank + 1 + number % 5, np.float32).reshape(() if count == 1 and index == 0 else -1)
        handles.append((bps.push_pull_async(value, f"gradient_{index}", average=False, priority=-index), value))
    expected = sum(r + 1 + number % 5 for r in range(size))
    for index, (handle, value) in enumerate(handles):
        total = bps.synchronize(handle)
        if total.shape != value.shape or not np.all(total == expected):
            sys.exit(f"rank {rank}: WRONG SUM of gradient_{index} at step {number}")


def main():
    out, elements, steps = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
    bps.init()
    rank, size = bps.rank(), bps.size()
    step(elements, rank, size, 0)
    before = bps.communication_counters()
    for number in range(1, steps + 1):
        step(elements, rank, size, number)
    after = bps.communication_counters()
    sent = {int(server): (count - before["messages_sent_to_server"].get(server, 0)) / steps
            for server, count in after["messages_sent_to_server"].items()}
    received = (after["messages_received"] - before["messages_received"]) / steps
    out.with_name(f"{out.stem}_{rank}.json").write_text(json.dumps({"sent_to_server": sent, "received": received}))
    print(f"rank {rank}: done", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()

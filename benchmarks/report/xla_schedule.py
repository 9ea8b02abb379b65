"""Where XLA's schedule put push_pull's custom calls in a compiled training step: whether each gradient's
start runs as soon as the backward pass has produced it (so the sum travels while the pass goes on) and the
dones just before the optimizer's update.

    XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" <a training job>
    python -m benchmarks.report.xla_schedule DIR

For every module XLA dumped after its optimisations that calls bps_tf, it prints the positions of the starts,
the batch's after_all and the dones in the entry computation's order, how many kernels (fusions, convolutions,
library calls) run before the first start, between the starts and after them, and the order as one line:
K a kernel, S a start, A the after_all, D a done (other instructions left out).
"""

import argparse
import glob
import os
import re

TARGET = re.compile(r'custom_call_target="(bps_tf_[a-z_]+)"')
KERNEL = ("fusion", "convolution", "custom-call", "cublas", "cudnn")
SYMBOL = {"bps_tf_push_pull_start": "S", "bps_tf_push_pull_done": "D", "bps_tf_after_all": "A"}


def entry_order(text):
    """One symbol per instruction of the entry computation, in its (scheduled) order."""
    entry = text[text.index("\nENTRY"):]
    symbols = []
    for line in entry.splitlines()[1:]:
        if line.startswith("}"):
            break
        if "=" not in line:
            continue
        called = TARGET.search(line)
        if called:
            symbols.append(SYMBOL.get(called.group(1), "."))
        else:
            symbols.append("K" if any(word in line for word in KERNEL) else ".")
    return "".join(symbols)


def describe(order):
    first_start, after_all = order.find("S"), order.find("A")
    end_of_starts = after_all if after_all >= 0 else order.rfind("S") + 1
    return (f"instructions {len(order)}; first start at {first_start}, last start at {order.rfind('S')}, "
            f"after_all at {after_all}, dones from {order.find('D')} to {order.rfind('D')}; kernels before the "
            f"first start {order[:first_start].count('K')}, among the starts "
            f"{order[first_start:end_of_starts].count('K')}, after them {order[end_of_starts:].count('K')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dump_dir")
    args = parser.parse_args()
    found = False
    for path in sorted(glob.glob(os.path.join(args.dump_dir, "*after_optimizations.txt"))):
        text = open(path).read()
        if "bps_tf_push_pull_start" not in text:
            continue
        found = True
        order = entry_order(text)
        print(os.path.basename(path))
        print("  " + describe(order))
        print("  " + re.sub(r"\.+", ".", order))
    if not found:
        raise SystemExit(f"no module in {args.dump_dir} calls bps_tf's push_pull (dumped with --xla_dump_hlo_as_text?)")


if __name__ == "__main__":
    main()

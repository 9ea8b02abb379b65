"""Markdown tables of result files, printed by the drivers and pasted into docs/performance.md."""

import statistics


def human_bytes(n):
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def bandwidth_mb_s(nbytes, seconds):
    """Algorithm bandwidth: tensor bytes over time (MB = 10^6 B), as nccl-tests' algbw."""
    return nbytes / seconds / 1e6


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def push_pull_table(result):
    """Per size: bps_tf (TF op and NumPy core) and TF ring times, bandwidths, the speed-up, and the bounds
    of the emulated network when the result has them."""
    bounds = result.get("bounds")
    header = ["size", "bps_tf ms", "bps_tf MB/s", "bps core MB/s", "TF ring ms", "TF ring MB/s", "speed-up"]
    if bounds:
        header += ["bps_tf / bound M/B", "TF ring / bound 2(N-1)/N*M/B"]
    rows = []
    for row in result["results"]:
        n = row["bytes"]
        ours, core, ring = (row[k]["median_s"] for k in ("bps_tf", "bps_core", "tf_ring"))
        line = [human_bytes(n), f"{ours * 1e3:.2f}", f"{bandwidth_mb_s(n, ours):.0f}",
                f"{bandwidth_mb_s(n, core):.0f}", f"{ring * 1e3:.2f}", f"{bandwidth_mb_s(n, ring):.0f}",
                f"{ring / ours:.2f}x"]
        if bounds:
            line += [f"{ours / (n / bounds['link_bytes_s']):.2f}",
                     f"{ring / (bounds['ring_factor'] * n / bounds['link_bytes_s']):.2f}"]
        rows.append(line)
    return markdown(header, rows)


def train_table(result):
    """Per model and strategy: step time, samples/s, step time over the no-communication step time, the
    speed-up of BytePSStrategy (and of MWMS's variants) over MultiWorkerMirroredStrategy's defaults, and of
    BytePSStrategy's variants over its defaults."""
    runs = result["runs"]
    by = {}
    for r in runs:  # each strategy's defaults; the first run of them where they are repeated
        if not r.get("tuned"):
            by.setdefault((r["model"], r["strategy"]), r)
    rows = []
    for r in runs:
        local = by.get((r["model"], "local"))
        mwms = by.get((r["model"], "mwms"))
        bps = by.get((r["model"], "bps"))
        exposed = f"{r['median_step_s'] / local['median_step_s']:.2f}" if local else "-"
        compared = r["strategy"] == "bps" or (r["strategy"] == "mwms" and r.get("tuned"))
        versus = f"{mwms['median_step_s'] / r['median_step_s']:.2f}x" if mwms and compared else ""
        varied = r["strategy"] == "bps" and r is not bps
        over_bps = f"{bps['median_step_s'] / r['median_step_s']:.2f}x" if bps and varied else ""
        sent = r.get("sent_bytes_per_step")
        rows.append([r["model"], strategy_label(r), f"{r['gradient_bytes'] / 1e6:.1f}",
                     f"{sent / 1e6:.1f}" if sent else "-", r["global_batch"], f"{r['median_step_s'] * 1e3:.0f}",
                     f"{r['samples_per_s']:.1f}", exposed, versus, over_bps])
    return markdown(["model", "strategy", "gradients MB", "MB sent per step by worker 0", "global batch", "step ms",
                     "samples/s", "step / step without communication", "speed-up over MWMS",
                     "speed-up over BytePSStrategy"], rows)


def strategy_label(run):
    variant = run.get("variant", run["strategy"])
    label = STRATEGY_NAMES["bps"] if variant.startswith("bps+") else STRATEGY_NAMES[variant]
    if run.get("env"):
        label += " with " + " ".join(f"{k}={v}" for k, v in run["env"].items())
    return label


STRATEGY_NAMES = {"bps": "BytePSStrategy", "mwms": "MultiWorkerMirroredStrategy (RING)",
                  "local": "no communication (same per-worker batch)",
                  "lockstep": "no gradients, a barrier after every step (same per-worker batch)",
                  "bps-dense": "BytePSStrategy, sparse gradients densified"}


def tuning_table(result):
    """Per model and variant: step time and its ratio to the first variant of the model (the defaults)."""
    rows, first = [], {}
    for r in result["runs"]:
        base = first.setdefault(r["model"], r["median_step_s"])
        rows.append([r["model"], r["variant"], f"{r['median_step_s'] * 1e3:.0f}", f"{r['samples_per_s']:.1f}",
                     f"{r['median_step_s'] / base:.2f}"])
    return markdown(["model", "variant", "step ms", "samples/s", "step / defaults' step"], rows)


def accuracy_table(result):
    """Per variant: whether and when the target accuracy was reached (steps, training time), the time per step,
    and the time to the target relative to uncompressed BytePSStrategy."""
    runs = result["runs"]
    base = next((r["reached"] for r in runs if r["variant"] == "none"), None)
    rows = []
    for r in runs:
        reached, last = r["reached"], r["curve"][-1]
        label = "MultiWorkerMirroredStrategy (RING)" if r["variant"] == "mwms" else f"BytePSStrategy, {r['variant']}"
        step_ms = last["train_s"] / last["steps"] * 1e3
        if reached:
            versus = f"{base['train_s'] / reached['train_s']:.2f}x" if base else ""
            steps_ratio = f"{reached['steps'] / base['steps']:.2f}" if base else ""
            rows.append([label, f"{reached['accuracy']:.3f}", reached["steps"], f"{reached['train_s']:.1f}",
                         f"{step_ms:.0f}", steps_ratio, versus])
        else:
            rows.append([label, f"not reached (best {max(p['accuracy'] for p in r['curve']):.3f})", last["steps"],
                         f"{last['train_s']:.1f}", f"{step_ms:.0f}", "", ""])
    return markdown(["strategy, compression", f"test accuracy (target {result['target']})", "steps",
                     "training s", "ms per step", "steps / uncompressed steps",
                     "speed-up to target over uncompressed"], rows)


def stragglers_table(result):
    """Per mode and straggler: time to the target, worker 0's and the straggler's step time, and the time to
    the target relative to synchronous training with the same straggler and to the same mode without one."""
    runs = result["runs"]

    def seconds(run):
        return run["reached"]["train_s"] if run and run["reached"] else None

    def find(mode, slowdown):
        return next((r for r in runs if r["mode"] == mode and r["slowdown"] == slowdown), None)

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else ""

    rows = []
    for r in runs:
        mine = seconds(r)
        sync, alone = seconds(find("sync", r["slowdown"])), seconds(find(r["mode"], 1))
        sync_alone = seconds(find("sync", 1))
        rows.append([r["mode"], "none" if r["slowdown"] == 1 else f"{r['slowdown']:g}x",
                     f"{mine:.1f}" if mine else f"not reached ({max(p['accuracy'] for p in r['curve']):.3f})",
                     r["curve"][-1]["epoch"], f"{r['step_ms']:.0f}", f"{r['straggler_step_ms']:.0f}",
                     ratio(sync, mine), ratio(mine, alone), ratio(mine, sync_alone)])
    return markdown(["mode", "straggler", f"s to {result['target']}", "epochs", "worker 0 ms/step",
                     "straggler ms/step", "speed-up over sync (same straggler)", "time / same mode, no straggler",
                     "time / sync, no straggler"], rows)


# --- elastic recovery (benchmarks/elastic_recovery.py) ---------------------------------------------------

def _median(values):
    return statistics.median(values) if values else None


def ms_cell(value):
    return "-" if value is None else f"{value * 1e3:.0f}"


def s_cell(value):
    return "-" if value is None else f"{value:.2f}"


def elastic_recovery_table(result, role="worker"):
    """A row for each kill of a `role` (worker, server or scheduler), and one for all of them."""
    if role == "worker":
        restarted = [("process_started_s", "restarted: process up, s"), ("joined_s", "joined, s"),
                     ("first_step_s", "first step with all, s"), ("join_pause_s", "survivors' pause at the join, s")]
        survivors, r = "survivors'", result["recovery"]
    elif role == "server":
        restarted = [("process_started_s", "restarted: process up, s"),
                     ("first_step_s", "taken back: first step with all servers, s"),
                     ("join_pause_s", "workers' pause at the take-back, s")]
        survivors, r = "workers'", result["recovery"]["server_kills"]
    else:
        restarted = [("process_started_s", "restarted: process up, s"),
                     ("first_step_s", "first step with every worker and server, s"),
                     ("join_pause_s", "workers' pause, s")]
        survivors, r = "workers'", result["recovery"]["scheduler_kills"]
    heads = [f"kill -9 of {role}", f"{survivors} next step, s (each)", "median, s", "next generation formed, s",
             "state synchronised, s", *(head for _, head in restarted)]
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    for kill in (k for k in result["recovery"]["kills"] if role in k):
        each = ", ".join(f"{s['next_step_s']:.2f}" for s in kill["survivors"])
        resets = [s["reset_s"] for s in kill["survivors"] if s["reset_s"] is not None]
        synced = [s["synchronised_s"] for s in kill["survivors"] if s["synchronised_s"] is not None]
        cells = [kill[role], each, s_cell(kill["median_next_step_s"]), s_cell(_median(resets)),
                 s_cell(_median(synced)), *(s_cell(kill["restart"][key]) for key, _ in restarted)]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    blanks = " |" * (len(heads) - 4)
    lines.append(f"| all | median of {len(r['all_next_step_s'])}: {s_cell(r['median_next_step_s'])}, "
                 f"max {s_cell(r['max_next_step_s'])} |{blanks} {s_cell(r['median_rejoin_first_step_s'])} (median) | "
                 f"{s_cell(r['median_join_pause_s'])} (median) |")
    return "\n".join(lines)


def elastic_commit_table(result):
    lines = ["| elastic callbacks | steps timed | mean step, ms | median step, ms | push_pull in flight, ms/step | "
             "one commit, ms (median) | commit per step, ms | mean step against none |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in result["commit_costs"]:
        name = "none" if c["setting"] == "none" else f"batches_per_commit={c['setting']}"
        against = "-" if c["vs_none"] is None or c["setting"] == "none" else f"{c['vs_none'] * 100:+.1f}%"
        lines.append(f"| {name} | {c['steps']} | {ms_cell(c['mean_step_s'])} | {ms_cell(c['median_step_s'])} | "
                     f"{ms_cell(c['mean_push_pull_s'])} | {ms_cell(c['median_commit_s'])} | "
                     f"{c['commit_s_per_step'] * 1e3:.1f} | {against} |")
    return "\n".join(lines)

"""The analysis of an elastic recovery run from its workers' events: each kill's recovery and rejoin (of a
worker or a server), the job's throughput over time and with fewer workers, and the cost of commits."""

import math
import statistics

from benchmarks.lib.elastic_events import at_full_strength, full_step_after, steps_of


def median(values):
    return statistics.median(values) if values else None


def commit_costs(args, events):
    """Per setting: worker 0's step intervals inside the commit-cost segments (the first step of a segment
    also holds fit's start: left out) and the time its commit callback took at the batches that committed."""
    rows = steps_of(events[0], "commit")
    by_setting = {}
    for previous, row in zip(rows, rows[1:]):
        if row["segment"] != previous["segment"] or row["pid"] != previous["pid"]:
            continue
        entry = by_setting.setdefault(row["setting"], {"intervals": [], "commits": [], "push_pull": []})
        entry["intervals"].append(row["t"] - previous["t"])
        entry["push_pull"].append(row["push_pull_s"] - previous["push_pull_s"])
    for row in rows:
        if row["setting"] != "none" and row["batch"] % int(row["setting"]) == 0:
            by_setting.setdefault(row["setting"], {"intervals": [], "commits": [], "push_pull": []})["commits"].append(
                row["commit_s"])
    none_mean = None
    if "none" in by_setting and by_setting["none"]["intervals"]:
        none_mean = statistics.mean(by_setting["none"]["intervals"])
    costs = []
    for setting in args.commit_settings.split(","):
        entry = by_setting.get(setting, {"intervals": [], "commits": [], "push_pull": []})
        intervals = entry["intervals"]
        mean = statistics.mean(intervals) if intervals else None
        costs.append({
            "setting": setting, "batches_per_commit": None if setting == "none" else int(setting),
            "steps": len(intervals), "mean_step_s": mean, "median_step_s": median(intervals),
            "commits": len(entry["commits"]), "median_commit_s": median(entry["commits"]),
            "commit_s_per_step": (median(entry["commits"]) / int(setting)) if entry["commits"] else 0.0,
            "vs_none": (mean / none_mean - 1) if mean and none_mean else None,
            "mean_push_pull_s": statistics.mean(entry["push_pull"]) if entry["push_pull"] else None,
        })
    return costs


def role_of(kill):
    return next((role for role in ("server", "scheduler") if role in kill), "worker")


def recovery(args, events, kills):
    """For each kill: every survivor's first completed step in a later generation than the one the kill broke
    (every worker survives a server's loss), when its reset callback ran (the next generation formed) and when
    fit began again (the state synchronised from rank 0); when the restarted process started, and the first
    step with every worker again (a worker's: its own, when it joined and its rank) or every server (a
    server's: the workers', when it was taken back), and the survivors' pause then."""
    results = []
    for kill in kills:
        role = role_of(kill)
        at, target, whole = kill["t"], kill[role], at_full_strength(args, role)
        survivors = []
        for worker in range(args.workers):
            if (role, worker) == ("worker", target):
                continue
            before = [r for r in steps_of(events[worker]) if r["t"] <= at]
            broken = before[-1]["gen"]  # the generation the kill broke
            after = [r for r in events[worker] if r["t"] > at]
            step = next(r for r in after if r["event"] == "step" and r["gen"] > broken)
            reset = next((r for r in after if r["event"] == "reset" and r["t"] <= step["t"]), None)
            begin = next((r for r in after if r["event"] == "begin" and reset and reset["t"] <= r["t"] <= step["t"]),
                         None)
            survivors.append({
                "worker": worker, "next_step_s": step["t"] - at, "rank_after": step["rank"],
                "size_after": step["size"], "servers_after": step.get("servers"),
                "reset_s": reset["t"] - at if reset else None,
                "synchronised_s": begin["t"] - at if begin else None,
                # steps whose sums were complete before the kill, logged just after it
                "steps_of_broken_generation_after_kill": sum(r["event"] == "step" and r["gen"] == broken
                                                             for r in after),
            })
        # The survivors' pause at the rejoin: their last step short of a worker or server, then the first whole.
        reference = survivors[0]["worker"]
        full = full_step_after(events, reference, at, broken, whole)
        short = [r for r in steps_of(events[reference]) if at < r["t"] < (full["t"] if full else float("inf"))
                 and not whole(r)]
        restart = {f"steps_with_fewer_{role}s": len(short),
                   "join_pause_s": (full["t"] - short[-1]["t"]) if short and full else None}
        if role == "worker":
            own = [r for r in events[target] if r["t"] > at]
            start = next((r for r in own if r["event"] == "start"), None)
            ready = next((r for r in own if r["event"] == "ready"), None)
            first_full = full_step_after(events, target, at, broken, whole)
            restart.update(process_started_s=start["t"] - at if start else None,
                           joined_s=ready["t"] - at if ready else None,
                           first_step_s=first_full["t"] - at if first_full else None,
                           rank_after=first_full["rank"] if first_full else None)
        else:
            restarted_at = kill.get("restarted_at")
            restart.update(process_started_s=restarted_at - at if restarted_at else None,
                           first_step_s=full["t"] - at if full else None)
        results.append({
            role: target, "pid": kill["pid"], "survivors": survivors,
            "median_next_step_s": median([s["next_step_s"] for s in survivors]),
            "max_next_step_s": max(s["next_step_s"] for s in survivors),
            "restart": restart,
        })
    return results


def throughput_series(args, events, start, end):
    """Samples/s of the whole job in bins of --bin-s from `start` (time.time) to `end`: every worker's completed
    steps of the recovery phase, each worth --batch-per-worker samples; and the job's size at each bin."""
    steps = sorted((r["t"], r["size"]) for rows in events.values() for r in steps_of(rows, "recovery"))
    count = max(1, math.ceil((end - start) / args.bin_s))
    samples = [0] * count
    sizes = [0] * count
    for t, size in steps:
        index = int((t - start) / args.bin_s)
        if 0 <= index < count:
            samples[index] += args.batch_per_worker
            sizes[index] = max(sizes[index], size)
    return {"bin_s": args.bin_s, "t": [round(i * args.bin_s, 3) for i in range(count)],
            "samples_per_s": [s / args.bin_s for s in samples], "workers": sizes}


def steady_rates(args, events, start, kills):
    """Samples/s with every worker (before the first kill) and with one fewer (between each kill and the
    restarted worker's first step, after the survivors' first step)."""
    steps = sorted((r["t"], r["size"]) for rows in events.values() for r in steps_of(rows, "recovery"))

    def rate(since, until):
        inside = [t for t, _ in steps if since < t <= until]
        return len(inside) * args.batch_per_worker / (until - since) if until > since and inside else None

    full = rate(start, kills[0]["t"]) if kills else None
    fewer = []
    for kill in (k for k in kills if role_of(k) == "worker"):
        survivors = [s["next_step_s"] for s in kill["survivors"]]
        if kill["restart"]["first_step_s"] is not None and kill["restart"]["join_pause_s"] is not None:
            since = kill["t"] + max(survivors)
            until = kill["t"] + kill["restart"]["first_step_s"] - kill["restart"]["join_pause_s"]
            value = rate(since, until)
            if value:
                fewer.append(value)
    return {"all_workers_samples_per_s": full, "one_fewer_samples_per_s": median(fewer)}


def summary(kills):
    """The survivors' next steps after every kill of `kills`, and the medians of the rejoins."""
    every = [s["next_step_s"] for k in kills for s in k["survivors"]]
    return {"median_next_step_s": median(every), "max_next_step_s": max(every, default=None),
            "all_next_step_s": every,
            "median_rejoin_first_step_s": median([k["restart"]["first_step_s"] for k in kills
                                                   if k["restart"]["first_step_s"] is not None]),
            "median_join_pause_s": median([k["restart"]["join_pause_s"] for k in kills
                                            if k["restart"]["join_pause_s"] is not None])}


def analyse(args, events, start, kills, end):
    kills_out = recovery(args, events, kills)
    for kill, raw in zip(kills_out, kills):
        kill["t"] = raw["t"]
    ready = next(r for r in events[0] if r["event"] == "ready")
    series = throughput_series(args, events, start, end)
    rates = steady_rates(args, events, start, kills_out)
    for kill in kills_out:
        kill["t"] = round(kill["t"] - start, 3)  # on the series' clock
    # the summary of the worker kills as before; of the server and scheduler kills apart
    by_role = {role: [k for k in kills_out if role_of(k) == role] for role in ("worker", "server", "scheduler")}
    return {
        "gradient_bytes": ready["gradient_bytes"],
        "recovery": {"kills": kills_out, **summary(by_role["worker"]), "server_kills": summary(by_role["server"]),
                     "scheduler_kills": summary(by_role["scheduler"])},
        "throughput": dict(series, **rates),
        "commit_costs": commit_costs(args, events),
    }

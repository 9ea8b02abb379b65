"""Markdown tables of result files, printed by the drivers and pasted into docs/performance.md."""


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

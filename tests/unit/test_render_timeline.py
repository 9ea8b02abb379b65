"""scripts/render_timeline.py on traces written as bps_tf writes them (one complete, one cut short)."""

import json
import subprocess
import sys

from testing.jobs import REPO_ROOT
from testing.scripts import load_script

SCRIPT = REPO_ROOT / "scripts" / "render_timeline.py"



def span(stage, tensor, ts_ms, dur_ms, worker):
    return {"name": stage, "cat": "bps", "ph": "X", "ts": ts_ms * 1000, "dur": dur_ms * 1000, "pid": worker,
            "tid": 1, "args": {"tensor": tensor}}


def write_trace(path, worker, complete):
    events = [{"name": "process_name", "ph": "M", "pid": worker, "args": {"name": f"worker {worker}"}}]
    for step in range(3):  # three steps 100 ms apart, each 2 ms of work
        start = step * 100 + worker * 0.5
        events += [span("PUSH", "grad", start, 0.5, worker), span("SUM_PULL", "grad", start + 0.5, 1.5, worker)]
    text = "[\n" + ",\n".join(json.dumps(e) for e in events)
    path.write_text(text + ("\n]\n" if complete else ""))


def test_bursts_split_at_idle_gaps():
    module = load_script("render_timeline")
    spans = [span("PUSH", "a", 0, 1, 0), span("PUSH", "a", 1.5, 1, 0), span("PUSH", "a", 50, 1, 0)]
    assert module.bursts(spans, gap_us=1000) == [[0, 2500], [50000, 51000]]


def test_renders_a_step_of_two_workers_one_trace_cut_short(tmp_path):
    write_trace(tmp_path / "comm0.json", 0, complete=True)
    write_trace(tmp_path / "comm1.json", 1, complete=False)  # its process was killed
    output = tmp_path / "step.png"
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "comm0.json"), str(tmp_path / "comm1.json"),
                             "-o", str(output), "--step", "1", "--gap", "10"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "burst 1 of 3, 2 rows, 2.5 ms" in result.stdout
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_step_beyond_the_trace_says_how_many_there_are(tmp_path):
    write_trace(tmp_path / "comm0.json", 0, complete=True)
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "comm0.json"), "-o", str(tmp_path / "x.png"),
                             "--step", "7"], capture_output=True, text=True)
    assert result.returncode != 0 and "3 bursts of activity" in result.stderr

"""scripts/timeline_completions.py on a trace written as bps_tf writes them: a step's sums in the order they
came back, with their gaps, from the step's first SCHEDULE span."""

import json

import pytest

from testing.scripts import load_script


def span(stage, tensor, ts_ms, dur_ms, detail=""):
    return {"name": stage, "cat": "bps", "ph": "X", "ts": ts_ms * 1000, "dur": dur_ms * 1000, "pid": 0, "tid": 1,
            "args": {"tensor": tensor, "detail": detail}}


def step_events(start_ms):
    """One step: a large partition pushed first and two small ones; the sums come back small, large, small."""
    events = []
    for tensor, elements, push_at, sum_end in (("step/big#0", 1024000, 0.0, 6.0), ("step/bias#0", 768, 1.0, 5.0),
                                                ("step/norm#0", 768, 2.0, 6.5)):
        detail = f"partition at 0, {elements} elements"
        events += [span("SCHEDULE", tensor, start_ms + push_at, 0.1, detail),
                   span("PUSH", tensor, start_ms + push_at, 0.5, detail),
                   span("SUM_PULL", tensor, start_ms + push_at + 0.5, sum_end - push_at - 0.5, detail)]
    return events


def test_a_steps_sums_in_the_order_they_came_back(tmp_path):
    module = load_script("timeline_completions")
    events = [span("DECLARE", "publish/initial_value", 0, 1)] + step_events(10) + step_events(100)
    path = tmp_path / "comm.json"
    path.write_text(json.dumps(events)[:-1])  # cut short, as a killed process leaves it
    rows = module.completions(module.load_trace(path), step=-1, match="step/")
    assert [(round(end, 3), round(gap, 3), elements) for end, gap, elements, _ in rows] == [
        (5.0, 0.0, 768), (6.0, 1.0, 1024000), (6.5, 0.5, 768)]
    assert [round(push_end, 3) for *_, push_end in rows] == [1.5, 0.5, 2.5]
    assert module.completions(module.load_trace(path), step=0, match="step/") == rows


def test_a_step_the_trace_does_not_hold_is_refused(tmp_path):
    module = load_script("timeline_completions")
    path = tmp_path / "comm.json"
    path.write_text(json.dumps(step_events(0)))
    with pytest.raises(SystemExit, match="holds 1 steps"):
        module.completions(module.load_trace(path), step=3)

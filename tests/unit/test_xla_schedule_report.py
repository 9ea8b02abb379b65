"""benchmarks.report.xla_schedule reads the order of push_pull's custom calls among a step's kernels from XLA's
text dumps."""

import subprocess
import sys

from benchmarks.report.xla_schedule import describe, entry_order

MODULE = """HloModule step, is_scheduled=true

fused_computation {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}

ENTRY main {
  a = f32[4]{0} parameter(0)
  b = f32[4]{0} fusion(a), kind=kLoop, calls=fused_computation
  s1 = f32[4]{0} custom-call(b), custom_call_target="bps_tf_push_pull_start"
  c = f32[4]{0} fusion(a), kind=kLoop, calls=fused_computation
  s2 = f32[4]{0} custom-call(c), custom_call_target="bps_tf_push_pull_start"
  t = s32[] custom-call(s1, s2), custom_call_target="bps_tf_after_all"
  d1 = f32[4]{0} custom-call(s1, t), custom_call_target="bps_tf_push_pull_done"
  d2 = f32[4]{0} custom-call(s2, t), custom_call_target="bps_tf_push_pull_done"
  e = f32[4]{0} fusion(d1), kind=kLoop, calls=fused_computation
  ROOT r = (f32[4]{0}, f32[4]{0}) tuple(e, d2)
}
"""


def test_order_and_counts_of_a_scheduled_step():
    order = entry_order(MODULE)
    assert order == ".KSKSADDK."
    assert describe(order) == ("instructions 10; first start at 2, last start at 4, after_all at 5, dones from 6 to 7; "
                               "kernels before the first start 1, among the starts 1, after them 1")


def test_command_reads_a_dump_directory_and_refuses_one_without_push_pulls(tmp_path):
    (tmp_path / "module_0001.step.cpu_after_optimizations.txt").write_text(MODULE)
    done = subprocess.run([sys.executable, "-m", "benchmarks.report.xla_schedule", str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert ".KSKSADDK." in done.stdout and "module_0001" in done.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = subprocess.run([sys.executable, "-m", "benchmarks.report.xla_schedule", str(empty)], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode != 0 and "no module" in refused.stderr

"""Writing a benchmark's JSON result file (the plots and docs/performance.md are made from these)."""

import json
from pathlib import Path


def save_result(output, result):
    """Writes `result` to `output` as indented JSON; does nothing when no output file was asked for."""
    if not output:
        return
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(result, indent=1) + "\n")

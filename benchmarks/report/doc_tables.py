"""Rewrites the result tables of docs/performance.md from the JSON files they cite.

Each table follows a line naming its result file as "(NAME.json, plot: ...)"; the table under it (the next
block of lines starting with "|") is replaced by one made from docs/performance/NAME.json. Run after a
benchmark so that the page and the files cannot disagree:
    python -m benchmarks.report.doc_tables docs/performance.md
"""

import json
import re
import sys
from pathlib import Path

from benchmarks.report.tables import accuracy_table, push_pull_table, stragglers_table, train_table, tuning_table

CITATION = re.compile(r"\(([\w.-]+\.json), plot:")


def table_for(result):
    if result.get("benchmark") == "train":
        return train_table(result)
    if result.get("benchmark") == "tuning":
        return tuning_table(result)
    if result.get("benchmark") == "time_to_accuracy":
        return accuracy_table(result)
    if result.get("benchmark") == "stragglers":
        return stragglers_table(result)
    return push_pull_table(result)


def rewrite(page):
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        out.append(lines[i])
        cited = CITATION.search(lines[i])
        i += 1
        if not cited:
            continue
        while i < len(lines) and not lines[i].strip():  # the blank line(s) before the table
            out.append(lines[i])
            i += 1
        if i == len(lines) or not lines[i].startswith("|"):
            sys.exit(f"{page}: no table follows the line citing {cited.group(1)}")
        while i < len(lines) and lines[i].startswith("|"):  # the old table
            i += 1
        source = page.parent / "performance" / cited.group(1)
        if not source.exists():
            sys.exit(f"{page} cites {source}, which does not exist: run the benchmark first")
        result = json.loads(source.read_text())
        out.extend(table_for(result).splitlines())
    page.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    rewrite(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/performance.md"))

"""Runs every case and rewrites the table of docs/reliability.md: `python -m tests.reliability
docs/reliability.md` (`--only WORDS` runs the cases whose name holds WORDS, and prints instead of writing)."""

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.reliability import cases_attacks, cases_environment, cases_faults, cases_input
from tests.reliability.harness import Outcome

CASES = cases_input.CASES + cases_environment.CASES + cases_faults.CASES + cases_attacks.CASES
BEGIN, END = "<!-- cases: begin -->", "<!-- cases: end -->"


def run_case(case):
    started = time.monotonic()
    try:
        outcome = case.run()
    except Exception as error:  # a case that could not even run is reported, not hidden
        outcome = Outcome(False, f"the case failed to run: {type(error).__name__}: {error}")
    if outcome.seconds is None:
        outcome.seconds = time.monotonic() - started
    return outcome


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(results):
    lines = ["| # | kind | case | expected | observed | time (s) | held |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for i, (case, outcome) in enumerate(results, 1):
        lines.append(f"| {i} | {case.category} | {cell(case.name)} | {cell(case.expected)} | {cell(outcome.observed)} "
                     f"| {outcome.seconds:.1f} | {'yes' if outcome.held else '**no**'} |")
    held = sum(o.held for _, o in results)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines.append("")
    lines.append(f"{held} of {len(results)} held. Run with commit {commit} on {time.strftime('%Y-%m-%d')}.")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("page", nargs="?", default="docs/reliability.md")
    parser.add_argument("--only", default="", help="run the cases whose name or kind holds this, and print")
    args = parser.parse_args()
    chosen = [c for c in CASES if args.only.lower() in (c.name + " " + c.category).lower()]
    results = []
    for case in chosen:
        outcome = run_case(case)
        results.append((case, outcome))
        print(f"{'held' if outcome.held else 'NOT HELD':8} {outcome.seconds:6.1f} s  {case.name}: {outcome.observed}",
              flush=True)
    if args.only:
        return 0
    page = Path(args.page)
    text = page.read_text()
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), BEGIN + "\n" + table(results) + "\n" + END, text,
                 flags=re.S)
    page.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())

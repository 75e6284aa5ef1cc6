"""`make bench`: run every bench/bench_*.py script in name order and print their figures.

Each script is standalone (python bench/bench_x.py), prints a table of what it measured, and
exits non-zero when it could not measure. Before each, the machine settles (targets.settle): a
CHECKPOINT, a sync, and a wait for idle CPUs, so no script measures beside the last one's
writes. Pass names to run a subset: `make bench BENCH=ingest`.
At the end, every figure held to a target (bench/targets.py) is listed beside its target, the
CPU reference taken before and after the run and the PostgreSQL settings that depart from
Debian's defaults, which the targets assume; the run exits non-zero when a script failed or did
not report one of its figures.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from targets import (  # noqa: E402 (after the path is set)
    DEBIAN_DEFAULTS,
    TARGETS,
    cpu_reference,
    parsed,
    postgres_departures,
    settle,
)


def run_script(script: Path, figures: dict[str, float]) -> int:
    """Run one script, echoing its output and collecting its FIGURE lines; its exit code."""
    process = subprocess.Popen(
        [sys.executable, "-u", str(script)],
        cwd=HERE.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        print(line, end="", flush=True)
        found = parsed(line)
        if found:
            figures[found[0]] = found[1]
    return process.wait()


def summary(figures: dict[str, float], ran: list[str], before: dict, after: dict) -> int:
    """Print the targets' table; how many figures of the scripts run are missing."""
    print("\n=== targets (issue 33) ===")
    print(f"CPU reference before: {_reference(before)}; after: {_reference(after)}")
    departures = postgres_departures()
    if departures:
        print(f"PostgreSQL departs from Debian's defaults: {'; '.join(departures)}")
    elif departures is not None:
        print(f"PostgreSQL on Debian's defaults ({', '.join(DEBIAN_DEFAULTS)})")
    missing = 0
    for key, target in TARGETS.items():
        if target.script not in ran:
            continue
        if key not in figures:
            missing += 1
            print(f"  {target.label:<42} {'not measured':>14}  target {target.bound()}")
            continue
        value = figures[key]
        verdict = "met" if target.met(value) else "MISSED"
        print(
            f"  {target.label:<42} {value:>14,.2f}  {target.unit:<8} "
            f"target {target.bound()}: {verdict}"
        )
    return missing


def _reference(reference: dict) -> str:
    return ", ".join(f"{name} {value:,.0f}" for name, value in reference.items())


def main(selected: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if selected:
        scripts = [s for s in scripts if any(name in s.stem for name in selected)]
    before = cpu_reference()
    figures: dict[str, float] = {}
    failures = 0
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        print(settle(), flush=True)
        started = time.monotonic()
        returncode = run_script(script, figures)
        print(f"--- {script.stem}: exit {returncode}, {time.monotonic() - started:.0f} s")
        failures += returncode != 0
    missing = summary(figures, [s.stem for s in scripts], before, cpu_reference())
    return 1 if failures or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or os.environ.get("BENCH", "").split()))

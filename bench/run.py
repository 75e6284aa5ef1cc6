"""`make bench`: run every bench/bench_*.py script in name order and print their figures.

Each script is standalone (python bench/bench_x.py), prints a table of what it measured, and
exits non-zero when it could not measure. Pass names to run a subset: `make bench BENCH=ingest`.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(selected: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if selected:
        scripts = [s for s in scripts if any(name in s.stem for name in selected)]
    failures = 0
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, check=False)
        print(f"--- {script.stem}: exit {result.returncode}, {time.monotonic() - started:.0f} s")
        failures += result.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or os.environ.get("BENCH", "").split()))

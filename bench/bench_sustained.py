"""`make bench`'s run of `bench_freshness.py --sustained`: a 202 to a changed score at a million
users under 3,100 messages a second for 10 minutes (bench/freshness_sustained.py, issue 75).

    .venv/bin/python bench/bench_sustained.py [--minutes 1]    # the same as the line below
    .venv/bin/python bench/bench_freshness.py --sustained [--minutes 1]

A script of its own so that `make bench BENCH=freshness` still runs the freshness benchmark
alone, and `make bench BENCH=sustained` this one.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.freshness_sustained import main  # noqa: E402 (after the path is set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

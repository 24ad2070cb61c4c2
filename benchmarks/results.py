"""The benchmarks' recorded figures (``benchmarks/results.jsonl``): print the latest as a table, or write the tables
the README and docs/benchmarks.md quote (a test checks they agree with the file).

    python benchmarks/results.py            # the table
    python benchmarks/results.py --write    # README.md and docs/benchmarks.md rendered from the file
    python benchmarks/results.py --history ingest   # every recorded figure of one benchmark
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import QUOTED, history, rendered, table  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="render the figures' tables in README.md and docs/")
    ap.add_argument("--history", metavar="BENCHMARK", help="every recorded figure of BENCHMARK, oldest first")
    args = ap.parse_args()
    entries = history()
    if args.history:
        for e in entries:
            if e.figure.benchmark == args.history:
                print(f"{e.date}  {e.commit:18s} load {e.load[0]:4.1f}  {e.figure.figure}: {e.figure.value:g} "
                      f"{e.figure.unit} (± {e.figure.spread:g})")  # fmt: skip
        return
    if not args.write:
        print(table(entries))
        return
    for name, brief in QUOTED.items():
        path = HERE.parent / name
        path.write_text(rendered(path.read_text(encoding="utf-8"), entries, brief), encoding="utf-8")
        print(f"wrote the figures in {name}")


if __name__ == "__main__":
    main()

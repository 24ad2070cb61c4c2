"""``honestscale claims check`` of a long claims file on a centre's store, beside one judging of that store.

Writes the centre's store of ``benchmarks/centre.py`` (``--campaigns`` campaigns of 48 runs each: 2 models x 2
frameworks x 1, 2, 4 workers x 4 repetitions; 4,032 runs at the default 84) with the real ``EventWriter``, ingests
it, and writes ``--claims`` claims about it (default 1,000), of every kind a paper makes, round-robin over the
campaigns: a time to train at one scale (at most; the best run), a throughput per worker (at least; the best run), a
throughput speedup and an efficiency over the series' base case (the series is weak scaling), an ordering of two
frameworks and one of two campaigns at one scale (each compares two run sets, with its test).

Then, each ``--repeat`` times, in fresh processes: the reference, ``honestscale lint --format json`` on the whole
store (the store read once, the view built, every rule run: what one analysis shared by every claim costs), and
``honestscale claims check FILE --format json``. Prints the check's time, its ratio to the reference (the claims'
own cost beside the one analysis they share), and the share of claims each verdict took. Goal on 2 cores: the check
under 30 s.

    python benchmarks/claims.py [--campaigns 84] [--claims 1000] [--repeat 3] [--record]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "claims"
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402
from benchmarks.centre import write_store  # noqa: E402

GOAL_S = 30.0
MODELS, FRAMEWORKS = ("resnet50", "bert"), ("torch", "tensorflow")


def _claim(i: int, campaigns: int) -> str:
    """The ``i``-th claim: its kind by ``i``, its campaign, model and framework round-robin."""
    c = i % campaigns
    model, framework = MODELS[(i // campaigns) % 2], FRAMEWORKS[(i // (2 * campaigns)) % 2]
    runs = f"campaign=centre-{c:03d},model={model},framework={framework}"
    kind = i % 6
    body = {
        0: f'measure = "time_to_train"\nruns = "{runs}"\nat = {{ workers = 2 }}\nrelation = "at_most"\n'
        'value = 20.0\nstatistic = "best"',
        1: f'measure = "throughput_per_worker"\nruns = "{runs}"\nat = {{ workers = 4 }}\nrelation = "at_least"\n'
        'value = 100\nstatistic = "best"',
        2: f'measure = "throughput_speedup"\nruns = "{runs}"\nat = {{ workers = 4 }}\nrelation = "at_least"\n'
        "value = 3.5",
        3: f'measure = "throughput_efficiency"\nruns = "{runs}"\nat = {{ workers = 2 }}\nrelation = "about"\n'
        'value = 0.95\ntolerance = "5%"',
        4: f'measure = "time_to_train"\nruns = "campaign=centre-{c:03d},model={model},framework=torch,workers=2"\n'
        f'than = "campaign=centre-{c:03d},model={model},framework=tensorflow,workers=2"\nrelation = "faster"',
        5: f'measure = "time_to_train"\nruns = "campaign=centre-{c:03d},model={model},framework={framework},workers=2"\n'
        f'than = "campaign=centre-{(c + 1) % campaigns:03d},model={model},framework={framework},workers=2"\n'
        'relation = "faster"',
    }[kind]
    return f'[[claim]]\nid = "c{i:04d}"\nsays = "claim {i} of the benchmark"\n{body}\n'


def write_claims(path: Path, n: int, campaigns: int) -> None:
    path.write_text("version = 1\n\n" + "\n".join(_claim(i, campaigns) for i in range(n)))


def _timed(argv: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t
    if done.returncode not in (
        0,
        1,
        3,
    ):  # 1: a rule fails or a claim is contradicted; 3: one cannot be verified
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return took, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--campaigns", type=int, default=84)
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--record", action="store_true", help="append the figures to benchmarks/results.jsonl"
    )
    args = parser.parse_args()
    session = Session("claims")
    shutil.rmtree(WORK, ignore_errors=True)
    events, store, file = WORK / "events", WORK / "centre.duckdb", WORK / "claims.toml"
    events.mkdir(parents=True)
    runs = write_store(events, args.campaigns)
    hs = [sys.executable, "-m", "honestscale"]
    subprocess.run([*hs, "ingest", str(events), "--store", str(store), "--quiet"], check=True)
    write_claims(file, args.claims, args.campaigns)
    print(f"{runs:,} runs in {args.campaigns} campaigns; {args.claims:,} claims", flush=True)
    lint_s, check_s, verdicts = [], [], Counter[str]()
    for _ in range(args.repeat):
        took, _ = _timed([*hs, "lint", "--store", str(store), "--format", "json"])
        lint_s.append(took)
        took, out = _timed([*hs, "claims", "check", str(file), "--store", str(store), "--format", "json"])
        check_s.append(took)
        verdicts = Counter(v["verdict"] for v in json.loads(out)["claims"])
        print(f"  lint {lint_s[-1]:6.1f} s   claims check {check_s[-1]:6.1f} s", flush=True)
    check, lint = statistics.median(check_s), statistics.median(lint_s)
    spread = (max(check_s) - min(check_s)) / 2
    said = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
    what = f"{args.claims:,} claims on {runs:,} runs"
    met = "met" if check < GOAL_S else "NOT met"
    print(
        f"\nclaims check of {what}: {check:.1f} s (median of {args.repeat}), {check / lint:.2f}x one lint of the "
        f"store ({lint:.1f} s); goal < {GOAL_S:.0f} s: {met}; verdicts: {said}"
    )
    goal = f"< {GOAL_S:.0f} s"
    timed = Figure(
        "claims", f"claims check, {what} (median of {args.repeat})", check, "s", spread, "lower", goal, said
    )
    against = f"{check:.1f} s against {lint:.1f} s"
    name = f"claims check / one lint of the store, {what}"
    ratio = Figure("claims", name, check / lint, "x", spread / lint, "lower", "", against)
    session.finish([timed, ratio], args.record)


if __name__ == "__main__":
    main()

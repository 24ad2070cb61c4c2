"""A centre's store at two sizes: how each command grows from the small store to the large one, beside a plain
DuckDB scan of the same events, measured in the same run.

Writes two stores with the real ``EventWriter`` (``benchmarks/centre.py``: 48 runs per campaign, 2 models x 2
frameworks x 1, 2, 4 workers x 4 repetitions, weak scaling; by default 21 and 84 campaigns: 1,008 and 4,032 runs,
100 steps per rank), then times each command as a user runs it (a fresh process, the interpreter's start-up
included) on each store:

  * ``ingest`` (and its peak RSS), ``runs --format json``, ``summary --format json``, ``lint --format json``,
    ``advise --format json``, ``report --campaign`` (one campaign, 48 runs) and ``report`` of the whole store (the
    overview of every campaign);
  * the reference: DuckDB's ``read_json`` of every event file (each line parsed, its envelope read: run, rank,
    seq, time, kind), counted in this process.

Prints each command's time at both sizes and its growth (large over small: 4.0 is linear in the runs) beside the
scan's growth, and the one campaign's report against the time its figures take to draw alone, one after another
with their PDF copies (the report saves those copies in a second process meanwhile; the rest named: view, lint and
model, figures as SVG, tables, HTML and PDF). The load average is printed beside each size: on a shared machine a
timing taken while other work runs is inflated, never a speedup.

Goals on 2 cores: no command grows faster than linearly (growth at most 4.0 x 1.25 for noise), one campaign's report
not at all; ``advise`` and the
whole-store ``report`` at the small size within 30 s; the 48-run campaign's report within 1.5x its figures plus the
interpreter's start-up.

``--record`` appends the figures (the largest growth of a command that reads the whole store, the one campaign's
report's growth, ``advise`` and the overview at the small size, the report against its figures) to
benchmarks/results.jsonl; every run prints them beside the last recorded.

    python benchmarks/scale.py [--campaigns 21 84] [--steps 100] [--record]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "scale"
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402
from benchmarks.centre import write_store  # noqa: E402

NOISE = 1.25  # growth up to 4.0 x this is called linear on a shared machine
CAMPAIGN = "centre-001"


def _timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of a command run in a fresh process; its failure stops the benchmark."""
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        f"r = subprocess.run({cmd!r}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); "
        "dt = time.perf_counter() - t; "
        "sys.stderr.write(r.stderr.decode()[-2000:] if r.returncode else ''); "
        "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, r.returncode)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dt, rss, rc = out.stdout.split()
    if int(rc) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({rc}): {out.stderr}")
    return float(dt), int(rss)


def _scan(events: Path) -> float:
    import duckdb

    files = sorted(str(p) for p in events.rglob("*.jsonl"))
    t = time.perf_counter()
    con = duckdb.connect()
    con.execute(  # every line parsed, its envelope read (the schema of 2,000+ files is not sampled one by one)
        "SELECT count(*), count(DISTINCT run_id), max(time) FROM read_json(?, format = 'newline_delimited', "
        "columns = {run_id: 'VARCHAR', rank: 'INTEGER', seq: 'BIGINT', time: 'DOUBLE', kind: 'VARCHAR'})",
        [files],
    )
    con.fetchall()
    con.close()
    return time.perf_counter() - t


def _figures(store: Path) -> dict[str, float]:
    """The one campaign's report in this process, part by part: view, lint and model, its figures drawn alone,
    and the whole report (figures, tables, HTML, PDF)."""
    from honestscale.report import analyse, report
    from honestscale.report._figures import render, render_frameworks
    from honestscale.store import open_store
    from honestscale.view import build

    out: dict[str, float] = {}
    t = time.perf_counter()
    with open_store(store, read_only=True) as con:
        view = build(con, CAMPAIGN)
    out["view"] = time.perf_counter() - t
    t = time.perf_counter()
    model, _ = analyse(view, CAMPAIGN)
    out["lint and model"] = time.perf_counter() - t
    folder = WORK / "figures"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for key, where in (("figures", folder), ("figures as SVG only", None)):
        t = time.perf_counter()
        for kind, draw in (("scaling", render), ("framework", render_frameworks)):
            for i, c in enumerate([c for c in model.comparisons if c.kind == kind], start=1):
                draw(
                    c, i, where
                )  # with a folder: SVG and PDF files, one figure after another, in this process
        out[key] = time.perf_counter() - t
    t = time.perf_counter()
    report(view, pdf=WORK / "campaign-inproc.pdf", campaign=CAMPAIGN)
    out["report in process"] = time.perf_counter() - t + out["view"]
    return out


def measure(campaigns: int, steps: int) -> dict[str, float]:
    folder = WORK / f"c{campaigns}"
    shutil.rmtree(folder, ignore_errors=True)
    events, store = folder / "events", folder / "store.duckdb"
    t = time.perf_counter()
    runs = write_store(events, campaigns, steps)
    size = sum(p.stat().st_size for p in events.rglob("*.jsonl")) / 1e6
    load = os.getloadavg()[0]
    print(f"\n{runs} runs in {campaigns} campaigns: {size:,.0f} MB of events written in {time.perf_counter() - t:.0f} s; "
          f"load average {load:.1f} on {os.cpu_count()} cores", flush=True)  # fmt: skip
    hs = [sys.executable, "-m", "honestscale"]
    got: dict[str, float] = {"runs": runs, "scan": _scan(events)}
    ingest, rss = _timed([*hs, "ingest", str(events), "--store", str(store), "--quiet"])
    got["ingest"], got["ingest_rss"] = ingest, rss
    commands = {
        "runs --format json": ["runs", "--format", "json"],
        "summary --format json": ["summary", "--format", "json"],
        "lint --format json": ["lint", "--format", "json"],
        "advise --format json": ["advise", "--format", "json"],
        f"report --campaign ({CAMPAIGN}, 48 runs)": [
            "report",
            "--campaign",
            CAMPAIGN,
            "-o",
            str(folder / "c.pdf"),
        ],
        "report (the store's overview)": ["report", "-o", str(folder / "store.pdf")],
    }
    for name, args in commands.items():
        if name.startswith("lint"):  # exit 1 when an error-severity rule fails: not a failure of the command
            t = time.perf_counter()
            subprocess.run([*hs, *args, "--store", str(store)], stdout=subprocess.DEVNULL, check=False)
            got[name] = time.perf_counter() - t
        else:
            got[name] = _timed([*hs, *args, "--store", str(store)])[0]
        print(f"  {name:42s} {got[name]:7.1f} s", flush=True)
    print(f"  {'ingest':42s} {got['ingest']:7.1f} s  (peak RSS {rss / 2**20:,.0f} MiB)")
    print(f"  {'DuckDB read_json scan of the same events':42s} {got['scan']:7.1f} s")
    got.update({f"part:{k}": v for k, v in _figures(store).items()})
    got["startup"] = _timed([*hs, "--version"])[0]
    got["load"] = load
    return got


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--campaigns", type=int, nargs=2, default=(21, 84), metavar=("SMALL", "LARGE"))
    parser.add_argument(
        "--steps", type=int, default=100, help="step events per rank (100: ~105 MB per 1,000 runs)"
    )
    parser.add_argument(
        "--record", action="store_true", help="append the figures to benchmarks/results.jsonl"
    )
    args = parser.parse_args()
    session = Session("scale")
    small, large = (measure(c, args.steps) for c in args.campaigns)
    scale = large["runs"] / small["runs"]
    print(f"\ngrowth from {small['runs']:.0f} to {large['runs']:.0f} runs ({scale:.1f} = linear); load average "
          f"{small['load']:.1f} and {large['load']:.1f}")  # fmt: skip
    scan = large["scan"] / small["scan"]
    names = ["ingest", *[k for k in small if k.startswith(("runs ", "summary", "lint", "advise", "report"))]]
    worst, worst_name, one = 0.0, "", 0.0
    for name in names:
        growth = large[name] / small[name]
        if "--campaign" in name:  # one campaign of 48 runs at both sizes: it should not grow with the store
            one = growth
            verdict = "constant" if growth <= NOISE else "GROWS WITH THE STORE"
        else:
            if growth > worst:
                worst, worst_name = growth, name
            verdict = "linear or better" if growth <= scale * NOISE else "FASTER THAN LINEAR"
        print(f"  {name:42s} {small[name]:7.1f} s -> {large[name]:7.1f} s   growth {growth:4.1f}  "
              f"(scan {scan:4.1f})  {verdict}")  # fmt: skip
    print(
        f"  peak RSS of ingest: {small['ingest_rss'] / 2**20:,.0f} -> {large['ingest_rss'] / 2**20:,.0f} MiB"
    )
    for name in ("advise --format json", "report (the store's overview)"):
        ok = "met" if small[name] <= 30 else "NOT met"
        print(f"goal: {name} at {small['runs']:.0f} runs within 30 s: {small[name]:.1f} s, {ok}")
    part = {k.removeprefix("part:"): v for k, v in small.items() if k.startswith("part:")}
    cli = small[f"report --campaign ({CAMPAIGN}, 48 runs)"]
    svg = part["figures as SVG only"]
    rest = part["report in process"] - svg - part["view"] - part["lint and model"]
    ratio = (cli - small["startup"]) / part["figures"]
    print(f"goal: the 48-run report within 1.5x its figures: {cli:.1f} s from the command line, of which start-up "
          f"{small['startup']:.1f} s (interpreter and imports); without it {ratio:.2f}x its {part['figures']:.1f} s of "
          f"figures drawn alone, one after another, with their PDF copies ({part['figures'] - svg:.1f} s of them), "
          f"{'met' if ratio <= 1.5 else 'NOT met'}. The report saves those copies in a second process while it draws "
          f"and lays out the rest; in this process: view {part['view']:.2f} s, lint and model "
          f"{part['lint and model']:.2f} s, figures as SVG {svg:.2f} s, tables, HTML and PDF {rest:.2f} s")  # fmt: skip
    size = f"{small['runs']:,.0f} to {large['runs']:,.0f} runs"
    once = "measured once: no spread"
    session.finish(
        [
            Figure(
                "scale",
                f"largest growth of a whole-store command, {size} (linear: {scale:.1f})",
                worst,
                "x",
                0.0,
                "lower",
                f"<= {scale * NOISE:.1f}",
                f"{worst_name}; the scan's {scan:.1f}; {once}",
            ),
            Figure(
                "scale",
                f"growth of one campaign's report, {size}",
                one,
                "x",
                0.0,
                "lower",
                f"<= {NOISE}",
                once,
            ),
            *(
                Figure(
                    "scale",
                    f"{name} at {small['runs']:,.0f} runs",
                    small[name],
                    "s",
                    0.0,
                    "lower",
                    "< 30 s",
                    f"a fresh process; {once}",
                )
                for name in ("advise --format json", "report (the store's overview)")
            ),
            Figure(
                "scale",
                "the 48-run report / its figures alone, start-up left out",
                ratio,
                "x",
                0.0,
                "lower",
                "<= 1.5",
                f"{cli:.1f} s from the command line, {small['startup']:.1f} s of it start-up; {once}",
            ),
        ],
        args.record,
    )


if __name__ == "__main__":
    main()

"""Ingest throughput against DuckDB's own JSON reader, measured side by side in one run.

Writes 1,000,000 native events across 64 rank files (16 runs x 4 ranks: run_start, steps,
epochs, evals, system samples, run_stop, as the runners write them), then times, each in a
fresh process and into a fresh store:

  * ``honestscale ingest DIR`` (validation, dedup, typed tables, runs projection, one
    transaction per file), and
  * the reference: ``CREATE TABLE t AS SELECT * FROM read_json([...64 files...])`` in DuckDB.

Each round runs the two in an order drawn at random (a host speeding up or slowing down through a round would
otherwise favour the one that always runs first). Prints both times, their ratio (goal: at most 2.0), the CPU seconds
of each (user + system: less moved by other tenants of the host than the wall clock, shown beside it, never the
figure) and the peak RSS of the ingest process (goal: under 1 GiB), beside the last figures recorded; ``--record``
appends them to benchmarks/results.jsonl.

    python benchmarks/ingest.py [--events 1000000] [--files 64] [--repeat 3] [--record]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402

WORK = HERE / "_work" / "ingest"
T = TypeVar("T")


def write_events(folder: Path, total: int, files: int) -> int:
    """Write ``total`` events over ``files`` rank files with the real EventWriter; return the count."""
    from honestscale.events import EventWriter

    ranks_per_run = 4
    per_file = total // files
    rng = random.Random(0)
    written = 0
    t = 1.7e9
    for f in range(files):
        run, rank = divmod(f, ranks_per_run)
        clock = iter(t + 0.01 * i for i in range(per_file + 10))
        w = EventWriter(folder, f"bench-run{run:02d}", rank, clock=lambda c=clock: next(c))
        w.run_start(framework="torch", world_size=ranks_per_run, nodes=1, accelerators_per_node=4,
                    accelerator="Tesla V100-SXM2-32GB", global_batch_size=256, local_batch_size=64,
                    campaign="bench", model="resnet50", dataset="imagenet", data_source="filesystem")  # fmt: skip
        n = 1
        step = 0
        while n < per_file - 1:
            if step % 500 == 499:
                w.epoch(epoch=step // 500, train_loss=rng.random(), samples=64 * 500)
            elif step % 50 == 49:
                w.system(device=rank, accel_util=90 + 10 * rng.random(), power_w=250.0, energy_j=step * 10.0,
                         rss_bytes=2**31)  # fmt: skip
            elif rank == 0 and step % 1000 == 999:
                w.eval(split="validation", metric="top1_accuracy", value=rng.random(), epoch=step // 500)
            else:
                w.step(epoch=step // 500, step=step, samples=64, t_total=0.1 + 0.01 * rng.random(),
                       t_data=0.01 * rng.random(), t_compute=0.07, t_comm=0.015, t_optimizer=0.004)  # fmt: skip
            step += 1
            n += 1
        w.run_stop("success")
        written += n + 1
        w.close()
    return written


def reference(files: list[str], db: Path) -> list[str]:
    """The reference's command: DuckDB's own ``read_json`` of ``files`` into a table of a new database ``db``, in a
    fresh process (the denominator of this benchmark's figure and of store_tiers.py's)."""
    sql = f"CREATE TABLE t AS SELECT * FROM read_json({json.dumps(files)}, format='newline_delimited')"
    return [
        sys.executable,
        "-c",
        f"import duckdb; c = duckdb.connect({str(db)!r}); c.execute({sql!r}); c.close()",
    ]


def in_drawn_order(
    commands: dict[str, list[str]], round_: int, run: Callable[[list[str]], T]
) -> dict[str, T]:
    """``run`` of each command, in an order drawn for ``round_`` (a host that speeds up or slows down through a round
    favours none of them), by name."""
    order = list(commands)
    random.Random(round_).shuffle(order)
    return {name: run(commands[name]) for name in order}


def _timed(cmd: list[str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds (user + system) of a command run in a fresh process."""
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        f"r = subprocess.run({cmd!r}, stdout=subprocess.DEVNULL); dt = time.perf_counter() - t; "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(dt, u.ru_maxrss * 1024, r.returncode, u.ru_utime + u.ru_stime)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    if out[2] != "0":
        raise SystemExit(f"{cmd[:4]} failed with exit code {out[2]}")
    return float(out[0]), int(out[1]), float(out[3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument(
        "--repeat", type=int, default=3, help="measure each side this many times; medians are printed"
    )
    ap.add_argument("--record", action="store_true", help="append the figures to benchmarks/results.jsonl")
    args = ap.parse_args()
    session = Session("ingest")
    folder = WORK / "events"
    if WORK.exists():
        shutil.rmtree(WORK)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    n = write_events(folder, args.events, args.files)
    files = sorted(str(p) for p in folder.rglob("*.jsonl"))
    size = sum(Path(p).stat().st_size for p in files)
    print(
        f"wrote {n:,} events in {len(files)} files ({size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s"
    )

    ours, ref, rss, cpu_ours, cpu_ref = [], [], [], [], []
    for i in range(args.repeat):
        store, ref_db = WORK / f"hs{i}.duckdb", WORK / f"ref{i}.duckdb"
        commands = {
            "ours": [sys.executable, "-m", "honestscale", "ingest", str(folder), "--store", str(store), "-q"],
            "ref": reference(files, ref_db),
        }
        took = in_drawn_order(commands, i, _timed)
        ours.append(took["ours"][0])
        rss.append(took["ours"][1])
        cpu_ours.append(took["ours"][2])
        ref.append(took["ref"][0])
        cpu_ref.append(took["ref"][2])
    import duckdb

    con = duckdb.connect(str(WORK / "hs0.duckdb"), read_only=True)
    landed = con.execute("SELECT count(*) FROM events").fetchall()[0][0]
    con.close()
    con = duckdb.connect(str(WORK / "ref0.duckdb"), read_only=True)
    ref_rows = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
    con.close()
    assert landed == ref_rows == n, (landed, ref_rows, n)
    m_ours, m_ref = statistics.median(ours), statistics.median(ref)
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"honestscale ingest : {m_ours:6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in ours)})")
    print(f"duckdb read_json   : {m_ref:6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in ref)})")
    print(f"ratio ingest/read_json: {m_ours / m_ref:.2f}  (goal <= 2.0)")
    c_ours, c_ref = statistics.median(cpu_ours), statistics.median(cpu_ref)
    print(
        f"CPU seconds (user + system): ingest {c_ours:.2f}, read_json {c_ref:.2f}, ratio {c_ours / c_ref:.2f} "
        "(medians; beside the figure, not the figure)"
    )
    print(
        f"peak RSS of ingest: {max(rss) / 2**20:.0f} MiB  (goal < 1024 MiB); benchmark driver {self_rss / 1024:.0f} MiB"
    )
    ratios = [a / b for a, b in zip(ours, ref, strict=True)]
    what = f"{n:,} events in {len(files)} files"
    session.finish(
        [
            Figure(
                "ingest",
                f"ingest / DuckDB read_json, {what}",
                m_ours / m_ref,
                "x",
                (max(ratios) - min(ratios)) / 2,
                "lower",
                "<= 2.0 (toward 1.5)",
                f"median of {args.repeat}: {m_ours:.2f} s against {m_ref:.2f} s; CPU {c_ours:.2f} against "
                f"{c_ref:.2f} s ({c_ours / c_ref:.2f})",
            ),
            Figure(
                "ingest",
                f"peak RSS of ingest, {what}",
                max(rss) / 2**20,
                "MiB",
                (max(rss) - min(rss)) / 2 / 2**20,
                "lower",
                "< 1024 MiB",
            ),
        ],
        args.record,
    )
    shutil.rmtree(WORK)


if __name__ == "__main__":
    main()

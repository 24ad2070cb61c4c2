"""The two tiers of the store side by side, measured in one run: a DuckDB file and a DuckLake with a PostgreSQL catalog
(a throwaway cluster on loopback, started here as tests/postgres.py does; run as root with Debian's PostgreSQL).

  * **ingest**: ``--events`` native events (benchmarks/ingest.py's set, 1,000,000 by default) into an empty store of
    each tier, each in a fresh process, beside the reference, DuckDB's ``read_json`` of the same files into a table, in
    ``--repeat`` rounds (3), each in a drawn order; printed as ratios of the medians, the spread from the rounds. Each
    store is made first by ``honestscale migrate`` (timed apart and printed beside: a store is made once, as
    docs/store.md has a centre make its lake, and a new lake's catalog costs about 0.2 s more than a new file's);
  * **concurrent writers** on DuckLake: the same runs split among 1, 4 and 8 ``ingest`` processes started at once
    into a new lake each; events per second, as a ratio to the single writer (2 cores here: more writers cannot be
    faster, and conflicts make them redo work; what is checked is that each lands everything once);
  * **a dashboard page**: ``--campaigns`` x 48 runs (benchmarks/centre.py's store, 4,032 runs by default) in each tier,
    ``honestscale serve`` on it, the first (uncached) view of a campaign page and of the campaigns page once the
    server has judged every campaign, and the median of ``--requests`` views after; the page is shown before its
    figures are drawn, so the first figure's request (which draws them all) is timed too; the file tier is the
    reference.

    python benchmarks/store_tiers.py [--events 1000000] [--repeat 3] [--campaigns 84] [--requests 10] [--part dashboard]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "store_tiers"
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402
from benchmarks.centre import write_store  # noqa: E402
from benchmarks.ingest import in_drawn_order, reference, write_events  # noqa: E402
from benchmarks.serve import served_and_judged, server_ms  # noqa: E402
from tests.postgres import cluster  # noqa: E402

HS = [sys.executable, "-m", "honestscale"]


def _seconds(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def _events(store: str) -> tuple[int, int]:
    from honestscale.store import open_store

    con = open_store(store, read_only=True)
    try:
        row = con.execute("SELECT count(*), count(DISTINCT (run_id, rank, seq)) FROM events").fetchall()[0]
        return int(row[0]), int(row[1])
    finally:
        con.close()


def _tiers_once(
    pg: object, folder: Path, files: list[str], written: int, i: int
) -> tuple[float, float, float, float, float]:
    """One ingest into an empty store of each tier (made first, by ``migrate``) and the reference, in an order drawn
    for this round (a machine that speeds up or slows down through a round favours none of them): seconds of
    (reference, file, DuckLake, making the file store, making the lake)."""
    ref_db = WORK / f"ref{i}.duckdb"
    file_store = str(WORK / f"file{i}.duckdb")
    lake = pg.create_database(f"bench_ingest{i}")  # type: ignore[attr-defined]
    made = {"file": _seconds([*HS, "--store", file_store, "migrate"]),
            "lake": _seconds([*HS, "--store", lake, "--data-path", str(WORK / f"lake-ingest{i}"), "migrate"])}  # fmt: skip
    commands = {
        "ref": reference(files, ref_db),
        "file": [*HS, "--store", file_store, "ingest", str(folder), "-q"],
        "lake": [*HS, "--store", lake, "ingest", str(folder), "-q"],
    }
    took = in_drawn_order(commands, i, _seconds)
    assert _events(file_store) == _events(lake) == (written, written)
    ref_db.unlink()
    return took["ref"], took["file"], took["lake"], made["file"], made["lake"]


def ingest(pg: object, n: int, repeat: int) -> list[Figure]:
    folder = WORK / "events"
    folder.mkdir(parents=True)
    written = write_events(folder, n, 64)
    files = sorted(str(p) for p in folder.rglob("*.jsonl"))
    rounds = [_tiers_once(pg, folder, files, written, i) for i in range(repeat)]
    ref, t_file, t_lake, make_file, make_lake = (statistics.median(r[k] for r in rounds) for k in range(5))
    lake_file = [r[2] / r[1] for r in rounds]
    lake_ref = [r[2] / r[0] for r in rounds]
    print(f"ingest of {written:,} events (64 files), medians of {repeat}: read_json {ref:.1f} s; file {t_file:.1f} s "
          f"({t_file / ref:.2f}x read_json); DuckLake {t_lake:.1f} s ({t_lake / ref:.2f}x read_json, "
          f"{t_lake / t_file:.2f}x the file); DuckLake / file by round: "
          f"{', '.join(f'{x:.3f}' for x in lake_file)}; making the empty store first (migrate, not in these "
          f"figures): file {make_file:.2f} s, DuckLake {make_lake:.2f} s", flush=True)  # fmt: skip
    made = f"into empty stores made first (migrate: file {make_file:.2f} s, DuckLake {make_lake:.2f} s, not counted)"
    figures = [Figure("store_tiers", f"DuckLake ingest / the file store's, {written:,} events", t_lake / t_file, "x",
                      (max(lake_file) - min(lake_file)) / 2, "lower", "<= 1.1",
                      f"{t_lake:.1f} s against {t_file:.1f} s, medians of {repeat} rounds, {made}"),
               Figure("store_tiers", f"DuckLake ingest / DuckDB read_json, {written:,} events", t_lake / ref, "x",
                      (max(lake_ref) - min(lake_ref)) / 2, "lower", "",
                      f"{t_lake:.1f} s against {ref:.1f} s, medians of {repeat} rounds, {made}")]  # fmt: skip
    runs = sorted(p for p in folder.iterdir() if p.is_dir())
    single = None
    for writers in (1, 4, 8):
        lake = pg.create_database(f"bench_writers{writers}")  # type: ignore[attr-defined]
        subprocess.run([*HS, "--store", lake, "--data-path", str(WORK / f"lake-w{writers}"), "migrate"], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        shares = [runs[i::writers] for i in range(writers)]
        t = time.perf_counter()
        procs = [
            subprocess.Popen([*HS, "--store", lake, "ingest", *map(str, share), "-q"]) for share in shares
        ]
        assert all(p.wait() == 0 for p in procs)
        dt = time.perf_counter() - t
        assert _events(lake) == (written, written), "every event once"
        rate = written / dt
        single = single or rate
        print(f"  {writers} concurrent writer(s) into DuckLake: {dt:.1f} s, {rate:,.0f} events/s "
              f"({rate / single:.2f}x one writer)", flush=True)  # fmt: skip
    return figures


def _first_figure(url: str, campaign: str) -> str:
    """The address of the first figure on a campaign page (drawn when first asked for)."""
    with urllib.request.urlopen(url + f"campaigns/{campaign}", timeout=600) as response:
        found = re.search(r'src="(/campaigns/[^"]+\.svg)"', response.read().decode())
    assert found, campaign
    return found.group(1)


def dashboard(pg: object, campaigns: int, requests: int) -> None:
    events = WORK / "centre"
    events.mkdir(parents=True)
    runs = write_store(events, campaigns)
    stores = {"file": str(WORK / "centre.duckdb"), "DuckLake": pg.create_database("bench_centre")}  # type: ignore[attr-defined]
    print(f"\ndashboard on {runs:,} runs in {campaigns} campaigns", flush=True)
    first: dict[str, float] = {}
    for tier, store in stores.items():
        t = _seconds(
            [*HS, "--store", store, "--data-path", str(WORK / "lake-centre"), "ingest", str(events), "-q"]
        )
        t_judged = time.perf_counter()
        server, url, _ = served_and_judged(store)
        try:
            t_judged = time.perf_counter() - t_judged
            campaign = f"centre-{campaigns // 2:03d}"
            first[tier] = server_ms(url + f"campaigns/{campaign}")
            figure = _first_figure(url, campaign)
            # the figures are drawn after the page, on this request
            drawn = server_ms(url + figure.lstrip("/"))
            median = statistics.median(server_ms(url + f"campaigns/{campaign}") for _ in range(requests))
            overview = statistics.median(server_ms(url) for _ in range(requests))
            print(f"  {tier:8s}: ingested in {t:.0f} s, judged in {t_judged:.0f} s; campaign page first view "
                  f"{first[tier]:,.0f} ms (goal < 1,000 ms: {'met' if first[tier] < 1000 else 'NOT met'}), then "
                  f"median {median:,.1f} ms; its figures drawn after it in {drawn:,.0f} ms (the first figure's "
                  f"request); campaigns page median {overview:,.1f} ms"
                  + (f"; first view {first[tier] / first['file']:.2f}x the file's" if tier != "file" else ""),
                  flush=True)  # fmt: skip
        finally:
            server.terminate()
            server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--campaigns", type=int, default=84)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of the ingest part (each: the reference and both tiers, in a drawn order)")  # fmt: skip
    parser.add_argument("--part", choices=("ingest", "dashboard"), action="append",
                        help="measure only this part (repeatable; default: both)")  # fmt: skip
    parser.add_argument(
        "--record", action="store_true", help="append the figures to benchmarks/results.jsonl"
    )
    args = parser.parse_args()
    session = Session("store_tiers")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    try:
        for pg in cluster():
            parts = args.part or ["ingest", "dashboard"]
            if "ingest" in parts:
                session.finish(ingest(pg, args.events, args.repeat), args.record)
            if "dashboard" in parts:
                dashboard(pg, args.campaigns, args.requests)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()

"""``honestscale serve`` on a centre's store: server time of its pages beside the store reads and model builds behind
them, measured in the same run.

Writes a store of ``--campaigns`` campaigns (default 84) of 48 runs each (2 models x 2 frameworks x 1, 2, 4 workers x
4 repetitions, weak scaling; 4,032 runs) with the real ``EventWriter``, ingests it, starts ``honestscale serve`` in
its own process, waits until it has judged every campaign, then requests each page 20 times and prints the server
time (the ``Server-Timing`` header: from request to response, without the network) as median and p95, beside:

  * the campaigns page: the overview query on a fresh read-only connection (what a store change costs it);
  * a campaign page: its model's build (view from the store, lint, analysis model), as the CLI's
    ``report --format json`` does it, and the first (uncached) request, which also draws its figures;
  * a run page: its store reads and figure drawing.

Goals on 2 cores: campaigns page under 300 ms, a campaign page within 1.5x its model's build time, run page under
500 ms.

The first views (a campaign page's, which draws its figures, and a run page's) and the medians are recorded in
benchmarks/results.jsonl with ``--record``.

    python benchmarks/serve.py [--campaigns 84] [--requests 20] [--record]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "serve"
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402
from benchmarks.centre import write_store  # noqa: E402


def server_ms(url: str) -> float:
    with urllib.request.urlopen(url, timeout=600) as response:
        response.read()
        timing = response.headers["Server-Timing"]
    found = re.search(r"dur=([0-9.]+)", timing)
    assert found, timing
    return float(found.group(1))


def served_and_judged(store: str) -> tuple[subprocess.Popen[str], str, int]:
    """``honestscale serve`` on ``store`` in its own process, once it has judged every campaign: (process, url,
    campaigns)."""
    server = subprocess.Popen([sys.executable, "-m", "honestscale", "serve", "--store", store, "--port", "0"],
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stderr is not None
    found = re.search(r"(http://\S+/)", server.stderr.readline())
    assert found
    url = found.group(1)
    while True:
        with urllib.request.urlopen(url + "api/campaigns", timeout=600) as response:
            rows = json.loads(response.read())["campaigns"]
        if all(r["verdicts"] is not None for r in rows):
            return server, url, len(rows)
        time.sleep(2)


def times(url: str, n: int) -> tuple[float, float]:
    ms = sorted(server_ms(url) for _ in range(n))
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]


def reference(store: Path, campaign: str, run_id: str) -> dict[str, float]:
    """The work behind each page, done directly (no server), each on a fresh read-only connection."""
    from honestscale import judged, report
    from honestscale.serve import _run
    from honestscale.store import dashboard, open_store

    out: dict[str, float] = {}
    t = time.perf_counter()
    with open_store(store, read_only=True) as con:
        dashboard.campaign_overview(con, time.time())
    out["overview"] = time.perf_counter() - t
    t = time.perf_counter()
    with open_store(store, read_only=True) as con:
        j = judged.read(
            con, campaign
        )  # as the server builds a campaign's model, which a run page then reuses
    report.analyse(j.view, campaign, result=j.lint)
    out["model"] = time.perf_counter() - t
    t = time.perf_counter()
    with open_store(store, read_only=True) as con:
        data = _run.read(con, run_id, j)
    _run.page(data)
    out["run"] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--campaigns", type=int, default=84)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument(
        "--record", action="store_true", help="append the figures to benchmarks/results.jsonl"
    )
    args = parser.parse_args()
    session = Session("serve")
    shutil.rmtree(WORK, ignore_errors=True)
    events, store = WORK / "events", WORK / "centre.duckdb"
    events.mkdir(parents=True)
    t = time.perf_counter()
    runs = write_store(events, args.campaigns)
    print(f"wrote {runs} runs in {args.campaigns} campaigns in {time.perf_counter() - t:.0f} s", flush=True)
    hs = [sys.executable, "-m", "honestscale"]
    t = time.perf_counter()
    subprocess.run([*hs, "ingest", str(events), "--store", str(store), "--quiet"], check=True)
    print(f"ingested in {time.perf_counter() - t:.0f} s", flush=True)
    t = time.perf_counter()
    server, url, judged = served_and_judged(str(store))
    try:
        print(f"the server judged {judged} campaigns in {time.perf_counter() - t:.0f} s (background, once per "
              "change)", flush=True)  # fmt: skip
        campaign = "centre-041"
        run_id = "c041-resnet50-torch-4w-r2"
        ref = reference(store, campaign, run_id)
        first_campaign = server_ms(url + f"campaigns/{campaign}")
        with urllib.request.urlopen(url + f"campaigns/{campaign}", timeout=600) as response:
            figure = re.search(r'src="/(campaigns/[^"]+\.svg)"', response.read().decode())
        assert figure, "the campaign page shows its figures"
        first_figure = server_ms(url + figure.group(1))  # the page's figures are drawn when first asked for
        first_run = server_ms(url + f"runs/{run_id}")
        pages = {
            "campaigns page": (times(url, args.requests), ref["overview"], "overview query", 300.0),
            "campaign page": (
                times(url + f"campaigns/{campaign}", args.requests),
                ref["model"],
                "model build",
                None,
            ),
            "run page": (
                times(url + f"runs/{run_id}", args.requests),
                ref["run"],
                "run reads + figures",
                500.0,
            ),
        }
        print(f"\n{runs} runs, {args.campaigns} campaigns; server time of {args.requests} requests each")
        for name, ((median, p95), ref_s, what, goal_ms) in pages.items():
            ratio = median / (1000 * ref_s)
            goal = (f"goal < {goal_ms:.0f} ms: {'met' if p95 < goal_ms else 'NOT met'}" if goal_ms is not None
                    else f"goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}")  # fmt: skip
            print(f"  {name:15s} median {median:8.1f} ms  p95 {p95:8.1f} ms   {what} {1000 * ref_s:8.1f} ms  "
                  f"ratio {ratio:5.2f}x   {goal}")  # fmt: skip
        print(f"  first request of the campaign page: {first_campaign:.0f} ms (its figures are drawn when first asked "
              f"for: the first figure's request, which draws them and the exports, {first_figure:.0f} ms); of the run "
              f"page: {first_run:.0f} ms")  # fmt: skip
        figures = [Figure("serve", f"first view of a campaign page, {runs:,} runs", first_campaign, "ms", 0.0,
                          "lower", detail="one request: no spread measured"),
                   Figure("serve", f"first figure of a campaign page, {runs:,} runs (draws them all)", first_figure,
                          "ms", 0.0, "lower", detail="one request: no spread measured"),
                   Figure("serve", f"first view of a run page, {runs:,} runs", first_run, "ms", 0.0, "lower",
                          "< 500 ms", "one request: no spread measured")]  # fmt: skip
        for name, ((median, p95), ref_s, what, goal_ms) in pages.items():
            ratio = median / (1000 * ref_s)
            if goal_ms is None:
                figures.append(Figure("serve", f"{name} / its {what}, {runs:,} runs (median of {args.requests})",
                                      ratio, "x", (p95 - median) / (1000 * ref_s), "lower", "<= 1.5",
                                      f"{median:.1f} ms against {1000 * ref_s:.1f} ms; spread: p95 - median"))  # fmt: skip
            else:
                figures.append(Figure("serve", f"{name}, {runs:,} runs (median of {args.requests})", median, "ms",
                                      p95 - median, "lower", f"< {goal_ms:.0f} ms", "spread: p95 - median"))  # fmt: skip
        session.finish(figures, args.record)
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()

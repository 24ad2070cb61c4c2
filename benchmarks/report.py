"""What the report costs beyond its figures: the whole PDF against the same figures drawn alone, in one run.

Writes a synthetic-size campaign of 500 runs as events (10 scaling series of ResNet-50 on ImageNet,
workers 1 to 16, 10 repetitions each, with steps and evaluations), ingests it, then alternately
times:

  * the report: lint, analysis model, every figure (SVG + PDF + SVG export), tables (CSV, LaTeX),
    HTML and the PDF through WeasyPrint;
  * the reference: the same figures of the same analysis model rendered alone with matplotlib
    (the same SVG + PDF output), one after another in this process, nothing else. The report saves the figures'
    PDF copies in a second process while it draws and lays out the rest (``report/_copies.py``), so on 2 cores
    it can take less than 1.0x.

Prints both medians and their ratio beside the last figure recorded. Goal: the report costs at most 1.5x its
figures. ``--record`` appends the ratio to benchmarks/results.jsonl.

    python benchmarks/report.py [--series 10] [--reps 10] [--repeat 3] [--record]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks._results import Figure, Session  # noqa: E402
from honestscale.collector._sources import discover  # noqa: E402
from honestscale.collector.ingest import Ingester  # noqa: E402
from honestscale.events import EventWriter  # noqa: E402
from honestscale.report import analyse  # noqa: E402
from honestscale.report import report as make_report  # noqa: E402
from honestscale.report._figures import render  # noqa: E402
from honestscale.store import open_store  # noqa: E402
from honestscale.view import build as build_view  # noqa: E402

WORKERS = (1, 2, 4, 8, 16)


def write_campaign(out: Path, series: int, reps: int) -> int:
    rng = random.Random(0)
    runs = 0
    t0 = 1.75e9
    for s in range(series):
        for w in WORKERS:
            for r in range(reps):
                t = [t0]
                writer = EventWriter(out, f"s{s}-w{w}-r{r}", 0, clock=lambda t=t: t[0])
                ttt = 28800 / w ** (0.9 - 0.02 * s) * rng.uniform(0.97, 1.05)
                writer.run_start(campaign="bench", framework="torch", framework_version="2.4.0", world_size=w,
                                 nodes=max(1, w // 4), accelerators_per_node=min(w, 4), accelerator="A100",
                                 cpu="EPYC", software={"cuda": "12.4"}, model=f"resnet50-v{s}", dataset="imagenet",
                                 input_shape=[3, 224, 224], data_source="filesystem", global_batch_size=1024,
                                 local_batch_size=1024 // w, stop_criterion="target_accuracy", stop_value=0.759,
                                 scope="end_to_end", scaling="strong", config_hash=f"h{s}-{w}", purpose="final")  # fmt: skip
                for i in range(20):
                    t[0] = t0 + ttt * (i + 1) / 22
                    # rank 0 records the synchronous step: the global batch, in a time that scales like the ttt
                    st = 0.1 / w ** (0.9 - 0.02 * s) * rng.uniform(0.9, 1.1)
                    writer.step(epoch=0, step=i, samples=1024, t_total=st, t_data=st * 0.1, t_compute=st * 0.7,
                                t_comm=st * 0.15, t_optimizer=st * 0.05, warmup=i < 2)  # fmt: skip
                t[0] = t0 + ttt * 0.99
                writer.eval(
                    split="validation", metric="top1_accuracy", value=0.76 + rng.uniform(0, 0.004), epoch=40
                )
                writer.eval(
                    split="test", metric="top1_accuracy", value=0.759 + rng.uniform(0, 0.004), epoch=40
                )
                t[0] = t0 + ttt
                writer.run_stop("success")
                writer.close()
                runs += 1
                t0 += 100_000
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append the figure to benchmarks/results.jsonl")
    args = ap.parse_args()
    session = Session("report")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        n = write_campaign(tmp / "events", args.series, args.reps)
        store = tmp / "s.duckdb"
        con = open_store(store)
        Ingester(con).ingest(discover([str(tmp / "events")]).sources)
        con.close()
        print(
            f"store: {n} runs in {args.series} scaling series x {len(WORKERS)} worker counts x {args.reps} reps"
        )
        full, figures = [], []
        for i in range(args.repeat):
            con = open_store(store, read_only=True)
            t = time.perf_counter()
            view = build_view(con)
            con.close()
            out = make_report(view, pdf=tmp / f"r{i}.pdf", assets=tmp / f"r{i}_files")
            full.append(time.perf_counter() - t)
            model, _ = analyse(view)
            folder = tmp / f"f{i}"
            folder.mkdir()
            t = time.perf_counter()
            count = 0
            for k, c in enumerate([c for c in model.comparisons if c.kind == "scaling"], start=1):
                count += len(render(c, k, folder))
            figures.append(time.perf_counter() - t)
            shutil.rmtree(folder)
        # pdfinfo (poppler): WeasyPrint packs its page objects in compressed streams, where no regex sees them
        info = subprocess.run(
            ["pdfinfo", str(tmp / "r0.pdf")], capture_output=True, text=True, check=True
        ).stdout
        found = re.search(r"^Pages:\s+(\d+)", info, re.M)
        pages = int(found.group(1)) if found else 0
    r, f = statistics.median(full), statistics.median(figures)
    print(f"report (lint, model, {count} figures, tables, HTML, PDF of {pages} pages): {r:.2f} s "
          f"(runs: {', '.join(f'{x:.2f}' for x in full)}); {len(out.exports)} export files")  # fmt: skip
    print(
        f"the same {count} figures alone, one after another with their PDF copies: {f:.2f} s (runs: {', '.join(f'{x:.2f}' for x in figures)})"
    )
    print(f"ratio report/figures: {r / f:.2f}  (goal <= 1.5)")
    ratios = [a / b for a, b in zip(full, figures, strict=True)]
    figure = Figure(
        "report",
        f"report / its {count} figures alone, {n} runs (median of {args.repeat})",
        r / f,
        "x",
        (max(ratios) - min(ratios)) / 2,
        "lower",
        "<= 1.5",
        f"{r:.2f} s against {f:.2f} s; a PDF of {pages} pages; spread: half the range of the ratios",
    )
    session.finish([figure], args.record)


if __name__ == "__main__":
    main()

"""The trackers' readers against each tool's own reader of the same store, at three sizes, measured in one run.

Each input is written by the tool itself, never imitated: a TensorBoard event file by PyTorch's ``SummaryWriter``
(``train/loss`` and ``train/lr`` at every step, ``val/accuracy`` every 100 steps), an MLflow SQLite store by
``MlflowClient.log_batch`` (one run, ``loss`` and ``learning_rate`` at every step, ``eval_loss`` every 100: at
``--scale 1`` 10^6 metric values), and the same into MLflow's file store (``mlruns/``, one file per metric). For each size, in fresh processes, best of ``--repeat`` rounds, the process's
CPU time (user and system: a shared machine's other jobs stretch the wall clock, not this):

  * honestscale's reader: ``parse(path, "", None)``, what ``honestscale ingest`` runs on the file;
  * the tool's own reader of the same values: TensorBoard's ``EventAccumulator`` (``Reload`` and every tag's
    ``Scalars``), MLflow's ``MlflowClient`` (``search_runs`` and every metric's ``get_metric_history``), on the
    SQLite file or the file store.

Prints per tracker and size the values read, both times, their ratio (ours / the tool's), the growth exponent
log(t2 / t1) / log(n2 / n1) of ours from the smallest size to the largest (1 is linear), and the peak RSS of each
process (VmHWM). W&B, which ships no reader of its offline files: a project of 1,000 offline runs at ``--scale 1``
(trainings of 8 ranks, a run per rank in the training's group, 200 steps each), written by wandb in one process
(0.3 s a run), its quarter, half and whole read one file at a time as the ingest does, against decoding every record
with wandb's own ``Record`` class: the ratio, the growth and the peak memory (bounded: one run's records at a time).

At the largest size, the peak RSS of ``honestscale ingest`` of the store into a new DuckDB file (a process of its
own: read, mapped and landed; goal under 1 GiB at 10^6 values).

Every run prints, per tracker, the ratio and the growth exponent at the largest size beside the last recorded;
``--record`` appends them to benchmarks/results.jsonl.

    python benchmarks/trackers.py [--scale 0.1] [--repeat 2] [--only tb|mlflow|mlflow-files|wandb ...] [--record]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import Figure, Session  # noqa: E402

WORK = HERE / "_work" / "trackers"
FULL = 1_000_000  # metric values at --scale 1
FLAG = 1.3  # a growth exponent over this is superlinear (as benchmarks/readers.py)

_WRITE_TB = """
import sys
from torch.utils.tensorboard import SummaryWriter
folder, steps = sys.argv[1], int(sys.argv[2])
w = SummaryWriter(folder)
for step in range(1, steps + 1):
    w.add_scalar("train/loss", 1.0 / step, step)
    w.add_scalar("train/lr", 0.1, step)
    if step % 100 == 0:
        w.add_scalar("val/accuracy", 1.0 - 1.0 / step, step)
w.close()
"""
_WRITE_MLFLOW = """
import os, sys, time
os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # its file store, for the mlflow-files reader
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
uri, steps = sys.argv[1], int(sys.argv[2])
client = MlflowClient(tracking_uri=uri)
run = client.create_run(client.create_experiment("bench")).info.run_id
t0 = int(time.time() * 1000)
batch = []
for step in range(1, steps + 1):
    batch += [Metric("loss", 1.0 / step, t0 + step * 10, step), Metric("learning_rate", 0.1, t0 + step * 10, step)]
    if step % 100 == 0:
        batch.append(Metric("eval_loss", 1.0 / step, t0 + step * 10, step))
    if len(batch) >= 900:
        client.log_batch(run, metrics=batch)
        batch = []
client.log_batch(run, metrics=batch)
client.set_terminated(run)
"""
_WRITE_WANDB = """
import sys, wandb
runs, ranks = int(sys.argv[1]), 8
for i in range(runs):  # a project of trainings of 8 ranks, a W&B run per rank in the training's group
    run = wandb.init(project="bench", group=f"training-{i // ranks}", name=f"rank{i % ranks}", mode="offline",
                     config={"lr": 0.1, "batch_size": 64, "world_size": ranks}, reinit="create_new")
    for step in range(1, 201):
        run.log({"train/loss": 1.0 / step, "trainer/global_step": step})
        if step % 100 == 0:
            run.log({"val/accuracy": 1.0 - 1.0 / step, "trainer/global_step": step})
    run.finish()
"""
_MEASURE_WANDB = """
import json, resource, sys
from pathlib import Path
files = sorted(Path(sys.argv[1]).glob("*/run-*.wandb"))
from honestscale.collector.importers import wandb as reader
from honestscale.collector.importers.wandb._records import Framing, records
import wandb.proto.wandb_internal_pb2  # imports untimed
start = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
if sys.argv[2] == "ours":  # what honestscale ingest runs on each file, one file at a time
    got = sum(len(reader.parse(f, "", None).events) for f in files)
else:  # W&B ships no reader: every record decoded by its own Record class, over the file's framing
    got = sum(sum(1 for _ in records(f.read_bytes(), Framing())) for f in files)
cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - start
hwm = next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
print(json.dumps({"cpu_s": cpu, "values": got, "rss_mib": hwm / 1024, "files": len(files)}))
"""
_MEASURE = """
import json, os, resource, sys, time
from pathlib import Path
what, path = sys.argv[1], Path(sys.argv[2])
def ours():
    from honestscale.collector import importers
    fmt = {"tb": "tensorboard", "mlflow": "mlflow-sqlite", "mlflow-files": "mlflow-files"}[what]
    return len(importers.FORMATS[fmt].parse(path, "", None).events)
def theirs():
    if what == "tb":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        return sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"])
    from mlflow.tracking import MlflowClient
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    uri = f"sqlite:///{path}" if what == "mlflow" else f"file://{path.parent.parent.parent}"
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("bench").experiment_id])
    return sum(len(client.get_metric_history(run.info.run_id, k)) for k in run.data.metrics)
fn = ours if sys.argv[3] == "ours" else theirs
import honestscale.collector.importers, tensorboard.backend.event_processing.event_accumulator  # imports untimed
import mlflow.tracking
start = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
got = fn()
cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - start
hwm = next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
print(json.dumps({"cpu_s": cpu, "values": got, "rss_mib": hwm / 1024}))
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"benchmark step failed ({' '.join(args)}):\n{done.stderr[-3000:]}")
    return done.stdout


def _write(what: str, steps: int) -> Path:
    folder = WORK / f"{what}-{steps}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if what == "tb":
        _run(_WRITE_TB, str(folder), str(steps))
        return next(folder.glob("events.out.tfevents.*"))
    if what == "mlflow":
        _run(_WRITE_MLFLOW, f"sqlite:///{folder / 'mlflow.db'}", str(steps))
        return folder / "mlflow.db"
    _run(_WRITE_MLFLOW, f"file://{folder / 'mlruns'}", str(steps))
    return next(folder.glob("mlruns/*/*/meta.yaml"))  # the run's, which the reader is handed


def _size(what: str, path: Path) -> int:
    """The bytes read: the file, or a file store run's folder."""
    if what != "mlflow-files":
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.parent.rglob("*") if p.is_file())


def _ingest_peak(what: str, path: Path) -> float:
    """The peak RSS (MiB) of ``honestscale ingest`` of the store into a new DuckDB file, in a process of its own
    (read, mapped and landed: what a user's memory must hold)."""
    store = WORK / f"ingest-{what}.duckdb"
    store.unlink(missing_ok=True)
    # the file store is ingested as its mlruns/ folder
    target = path.parent.parent.parent if what == "mlflow-files" else path
    with (WORK / "ingest.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "honestscale", "ingest", str(target), "--store", str(store)],
                                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"honestscale ingest {target} failed:\n{(WORK / 'ingest.log').read_text()[-3000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def _best(what: str, path: Path, who: str, repeat: int) -> dict[str, float]:
    rounds = [json.loads(_run(_MEASURE, what, str(path), who)) for _ in range(repeat)]
    return min(rounds, key=lambda r: r["cpu_s"])


def _growth(first: tuple[int, float] | None, size: int, cpu_s: float) -> tuple[float, str]:
    """The growth exponent log(t2 / t1) / log(n2 / n1) from the smallest size, and its printed form ("" at the
    smallest size, where there is none)."""
    if first is None:
        return 0.0, ""
    exponent = math.log(cpu_s / first[1]) / math.log(size / first[0])
    return exponent, f", growth exponent {exponent:.2f}"


def _figures(
    name: str, size: float, values: str, ours: dict[str, float], ratio: float, exponent: float, repeat: int
) -> list[Figure]:
    """A tracker's two figures at its largest size: the ratio to the tool's own reader and the growth exponent."""
    detail = f"{values} ({size / 2**20:.1f} MiB); peak RSS {ours['rss_mib']:.0f} MiB; best of {repeat}: no spread kept"
    return [Figure("trackers", f"{name}: ours / the tool's reader, CPU, largest size", ratio, "x", 0.0, "lower", "",
                   detail),
            Figure("trackers", f"{name}: growth exponent, a quarter to all", exponent, "", 0.0, "lower",
                   f"<= {FLAG}", detail)]  # fmt: skip


def _wandb(runs: int, repeat: int) -> list[Figure]:
    """A project of ``runs`` offline runs written by wandb once; its first quarter, half and all of it (hard links to
    the same files) read by honestscale's reader and decoded by wandb's Record class, each in a fresh process."""
    written = WORK / "wandb-all"
    shutil.rmtree(written, ignore_errors=True)
    written.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", _WRITE_WANDB, str(runs)], cwd=written, capture_output=True,
                          text=True, env={**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline"})  # fmt: skip
    if done.returncode:
        raise SystemExit(f"writing the W&B runs failed:\n{done.stderr[-3000:]}")
    folders = sorted(p for p in (written / "wandb").glob("offline-run-*") if p.is_dir())
    first: tuple[int, float] | None = None
    figures: list[Figure] = []
    for part in (len(folders) // 4, len(folders) // 2, len(folders)):
        project = WORK / f"wandb-{part}" / "wandb"
        for folder in folders[:part]:
            (project / folder.name).mkdir(parents=True)
            for f in folder.glob("run-*.wandb"):
                os.link(f, project / folder.name / f.name)
        rounds = {who: [json.loads(_run(_MEASURE_WANDB, str(project), who)) for _ in range(repeat)]
                  for who in ("ours", "theirs")}  # fmt: skip
        ours, theirs = (min(r, key=lambda x: x["cpu_s"]) for r in rounds.values())
        size = sum(f.stat().st_size for f in project.glob("*/run-*.wandb"))
        exponent, growth = _growth(first, size, ours["cpu_s"])
        first = first or (size, ours["cpu_s"])
        if part == len(folders):
            figures = _figures("W&B offline runs (Record class)", size, f"{ours['files']:.0f} runs", ours,
                               ours["cpu_s"] / theirs["cpu_s"], exponent, repeat)  # fmt: skip
        print(f"  W&B offline runs (Record class): {ours['files']} runs ({size / 2**20:.1f} MiB): ours "
              f"{ours['cpu_s']:.2f} s ({ours['rss_mib']:.0f} MiB peak), records decoded {theirs['cpu_s']:.2f} s "
              f"({theirs['rss_mib']:.0f} MiB peak): ratio {ours['cpu_s'] / theirs['cpu_s']:.2f}{growth}")  # fmt: skip
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1, help="1: 10^6 metric values at the largest size")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", choices=("tb", "mlflow", "mlflow-files", "wandb"), action="append",
                    help="time only these (repeatable); all by default")  # fmt: skip
    ap.add_argument("--record", action="store_true", help="append the figures to benchmarks/results.jsonl")
    args = ap.parse_args()
    session = Session("trackers")
    recorded: list[Figure] = []
    only = set(args.only or ("tb", "mlflow", "mlflow-files", "wandb"))
    largest = max(int(FULL * args.scale / 2.01), 400)  # ~2 values per step at the largest size
    sizes = [largest // 4, largest // 2, largest]
    print(f"trackers: honestscale's reader against the tool's own, CPU seconds, best of {args.repeat}")
    for what, name in (
        ("tb", "TensorBoard (EventAccumulator)"),
        ("mlflow", "MLflow SQLite store (MlflowClient)"),
        ("mlflow-files", "MLflow file store (MlflowClient)"),
    ):
        if what not in only:
            continue
        first: tuple[int, float] | None = None
        for steps in sizes:
            path = _write(what, steps)
            ours, theirs = _best(what, path, "ours", args.repeat), _best(what, path, "theirs", args.repeat)
            size = _size(what, path)
            exponent, growth = _growth(first, size, ours["cpu_s"])
            first = first or (size, ours["cpu_s"])
            if steps == sizes[-1]:
                values = f"{int(theirs['values']):,} values"
                recorded += _figures(
                    name, size, values, ours, ours["cpu_s"] / theirs["cpu_s"], exponent, args.repeat
                )
                peak = _ingest_peak(what, path)
                recorded.append(Figure("trackers", f"{name}: peak RSS of honestscale ingest, largest size", peak,
                                       "MiB", 0.0, "lower", "< 1024", f"{values}; measured once"))  # fmt: skip
                print(f"  {name}: honestscale ingest of {values}: peak RSS {peak:.0f} MiB (goal < 1024)")
            print(f"  {name}: {int(theirs['values']):,} values ({size / 2**20:.1f} MiB): ours {ours['cpu_s']:.2f} s "
                  f"({ours['rss_mib']:.0f} MiB peak), theirs {theirs['cpu_s']:.2f} s ({theirs['rss_mib']:.0f} MiB "
                  f"peak): ratio {ours['cpu_s'] / theirs['cpu_s']:.2f}{growth}")  # fmt: skip
    if "wandb" in only:
        recorded += _wandb(max(int(1000 * args.scale), 32), args.repeat)
    shutil.rmtree(WORK, ignore_errors=True)
    if args.scale != 0.1:  # the figures name no size: one kind of run is recorded
        recorded = [replace(f, figure=f"{f.figure}, --scale {args.scale:g}") for f in recorded]
    session.finish(recorded, args.record)


if __name__ == "__main__":
    main()

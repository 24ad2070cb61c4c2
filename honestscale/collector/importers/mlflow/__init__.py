"""MLflow tracking stores, read with MLflow's own client: its SQLite file (``mlflow.db``, MLflow 3's default) and
its file store (``mlruns/``, each run's ``meta.yaml`` read with the run's folder; the experiment's ``meta.yaml`` and
the run's metric, parameter and tag files are read with it, never on their own).

A store holds many runs; each lands as a run of its own, named by MLflow's run id (``mlflow:<run id>``), in its
experiment's name as the campaign unless ``--campaign`` says another. What an MLflow run tells:

* its start and end (milliseconds, the client's clock) and its status: FINISHED lands as a success, FAILED as a
  failure, KILLED as cancelled; a run still RUNNING (or never ended: a process killed before ``end_run``) has no
  stop, and ``imported.stop`` says so;
* its parameters as hyper-parameters (MLflow keeps them as text: a number written as a number is read as one);
* its metrics, each with a timestamp and a step: the training ones (``loss``, ``learning_rate``, ...) make one step
  event per logging point after the first, its time the time since the point before and its ``iterations`` the steps
  between, as for TensorBoard; ``eval_*``, ``val_*``, ``validation_*`` and ``test_*`` ones are evaluations (their
  rates and runtimes no quality); the Hugging Face Trainer's end-of-training summary (``train_samples_per_second``)
  is its own claim;
* MLflow's system metrics (``system/*``, sampled by the run's own thread): an accelerator's utilisation, memory and
  power (``system/gpu_<i>_*``) land as system samples of device ``i`` (its power as measured by NVML, which the
  sampler reads); the host's CPU, memory, disk and network use are named in ``imported.system_metrics`` (the
  contract's ``cpu_percent`` is one process's, not the host's).

What MLflow does not record is said in ``imported.unknown``: how many processes trained (the Trainer and Lightning
log from the main process only: HS215 cannot verify), the samples per step, the time of the steps before the first
logging point. A run with no training metric and no evaluation (only parameters or system metrics: the second
process's run of an autologged DDP training, a run killed at once) lands nothing and is named in a note.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, NeedsLibrary, Parsed
from honestscale.collector.importers._build import RankEvents, configured_world
from honestscale.collector.importers._scalars import Scalar, add_rows, logged_steps, rows, trainer_claim
from honestscale.collector.importers.mlflow._store import Points, Run, file_store_run, runs

FORMAT = "mlflow-sqlite"
LABEL = "MLflow tracking store (SQLite)"
FILES = "mlflow-files"
FILES_LABEL = "MLflow file store run (mlruns/<experiment>/<run>/meta.yaml)"
_RUN_META = re.compile(rb"^run_id: [0-9a-f]{8,}\s*$", re.MULTILINE)
_GPU = re.compile(r"^system/gpu_(\d+)_(utilization_percentage|memory_usage_megabytes|power_usage_watts)$")
_GPU_FIELD = {
    "utilization_percentage": "accel_util",
    "memory_usage_megabytes": "accel_mem_bytes",
    "power_usage_watts": "power_w",
}
_STATUS = {"FINISHED": "success", "FAILED": "failed", "KILLED": "cancelled"}
_NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def sniff(path: Path, head: bytes) -> bool:
    """An SQLite database whose schema holds MLflow's tables (Alembic's version table, runs' latest metrics)."""
    return (
        head.startswith(b"SQLite format 3\x00") and b"alembic_version" in head and b"latest_metrics" in head
    )


def sniff_files(path: Path, head: bytes) -> bool:
    """A run's ``meta.yaml`` in MLflow's file store: its run id, experiment and lifecycle, in a folder named by it."""
    found = _RUN_META.search(head)
    return (
        path.name == "meta.yaml"
        and found is not None
        and found.group().split()[1].decode() == path.parent.name
        and b"experiment_id:" in head
        and b"lifecycle_stage:" in head
    )


def _param(text: str) -> Any:
    """A parameter as MLflow's client wrote it (str(value)): a number or a boolean read back, anything else text."""
    if _NUMBER.match(text):
        number = float(text)
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    return {"True": True, "False": False}.get(text, text)


def _scalars(points: Points) -> Iterator[Scalar]:
    """The training metrics and evaluations as scalars, made as the rows take them (never all held at once)."""
    return (
        Scalar(n, p.timestamp_ms / 1000, p.step, p.key, p.value)
        for n, p in enumerate(points, start=1)
        if not p.key.startswith("system/")
    )


def _system(points: Points) -> tuple[list[tuple[int, float, int, dict[str, Any]]], list[str]]:
    """The accelerators' samples (line, time, device, fields: one per device and sample), in time order; the host's
    metrics' names."""
    samples: dict[tuple[int, int], dict[str, Any]] = {}
    host: set[str] = set()
    for n, p in enumerate(points, start=1):
        if not p.key.startswith("system/"):
            continue
        m = _GPU.match(p.key)
        if m is None:
            host.add(p.key)
            continue
        if not math.isfinite(p.value) or p.value < 0:
            continue
        sample = samples.setdefault((p.step, int(m.group(1))), {"line": n, "time": p.timestamp_ms / 1000})
        megabytes = m.group(2) == "memory_usage_megabytes"
        sample[_GPU_FIELD[m.group(2)]] = int(p.value * 1e6) if megabytes else p.value
    ordered = sorted(samples.items(), key=lambda kv: (kv[1]["time"], kv[0][1]))
    return [(s.pop("line"), s.pop("time"), device, s) for (_, device), s in ordered], sorted(host)


def _framework(run: Run) -> str:
    """PyTorch where the run says so (the Trainer logs transformers_version among its parameters, autologging its
    flavour in a tag); else unknown."""
    flavour = run.tags.get("mlflow.autologging", "")
    if "transformers_version" in run.params or flavour in ("pytorch", "transformers"):
        return "torch"
    return {"tensorflow": "tensorflow", "keras": "tensorflow"}.get(flavour, "unknown")


def _unknown(run: Run, steps: int, world: bool, trainer: bool) -> list[str]:
    unknown = [] if world else [
        "world_size (an MLflow run does not say how many processes trained unless a parameter world_size does; "
        "the Trainer and Lightning log from the main process only)"
    ]  # fmt: skip
    unknown.append("samples per step")
    if steps:
        unknown.append(
            "each step's own time (a metric is logged every few steps: one step event per logging interval, "
            "its iterations the steps it covers)"
        )
        if trainer:
            unknown.append("the time of the steps up to the first logging point (it opens the clock)")
    else:
        unknown.append("step times (fewer than two logging points of a training metric)")
    if run.status not in _STATUS:
        unknown.append(f"how the run ended (its status is {run.status}: it never ended in the store)")
    return [*unknown, "accelerator", "the other ranks' numbers"]


def _land(out: Parsed, run: Run, campaign: str | None) -> bool:
    """One MLflow run's events into ``out``; False where it holds no training metric and no evaluation."""
    got = rows(out, _scalars(run.points))
    if not got.training_rows and not any(r.evals for r in got.rows):
        return False
    samples, host = _system(run.points)
    metrics, values = sorted(run.points.keys), len(run.points)
    run.points = Points()  # read: not held beside the events
    start = run.start_ms / 1000 if run.start_ms else min(got.walls.values())
    # the run opens the clock where it starts: a loop's, and the Trainer's, which starts before its training does
    # (the first interval is warm-up then: the start-up is in it); the Trainer's global_step counts the optimizer
    # steps done
    steps = logged_steps(out, got, opened=start if run.start_ms else None)
    trainer = "transformers_version" in run.params
    world = configured_world(run.params)
    rank = RankEvents(f"mlflow:{run.run_id}", 0)
    start_event = rank.add(
        1,
        "run_start",
        start,
        campaign=campaign or run.experiment,
        name=run.name,
        purpose="final",
        scope="end_to_end",
        framework=_framework(run),
        hyperparameters={k: _param(v) for k, v in run.params.items()} or None,
        claims=trainer_claim(got, "train_samples_per_second, logged by the run itself"),
        world_size=world[0] if world else None,
    )
    add_rows(rank, got, steps, warmup_known=False)
    for line, time, device, sample in samples:
        rank.add(line, "system", time, device=device, **sample)
    if run.status in _STATUS and run.end_ms:
        rank.add(values + 1, "run_stop", run.end_ms / 1000, status=_STATUS[run.status])
    start_event["imported"] = {
        "tool": f"MLflow (experiment {run.experiment!r}, run {run.run_id})",
        "ranks_in_log": "the process that logged the run (MLflow does not say which)"
        + (f", of {world[0]} (its parameter {world[1]})" if world else ""),
        "world_size_from": f"the run's parameter {world[1]} = {world[0]}" if world else None,
        "metrics": metrics,
        "system_metrics": {"samples": len(samples), "host_metrics_not_landed": host},
        "source": run.tags.get("mlflow.source.name"),
        "user": run.tags.get("mlflow.user"),
        "status": run.status,
        "clock": "each metric's timestamp (the logging process's clock, milliseconds); the run's start and end "
        "times as MLflow recorded them",
        "unknown": _unknown(run, len(steps), world is not None, trainer),
        "stop": None if run.status in _STATUS else f"the run's status is {run.status}: no end in the store",
    }
    out.events.extend(rank.numbered())
    out.notes.append(
        f"run {run.run_id} ({run.name!r}, {run.status}): {len(steps)} step events, "
        f"{sum(len(r.evals) for r in got.rows)} evaluations, {len(samples)} accelerator samples"
    )
    return True


def parse(path: Path, text: str, campaign: str | None) -> Parsed:
    del text  # a database: read by MLflow's client from a copy of the file
    return _parse(path, lambda: runs(path), campaign)


def parse_files(path: Path, text: str, campaign: str | None) -> Parsed:
    del text  # the run's meta.yaml: read by MLflow's client with the run's folder
    return _parse(path, lambda: iter([file_store_run(path)]), campaign)


def _parse(path: Path, read: Callable[[], Iterator[Run]], campaign: str | None) -> Parsed:
    out = Parsed()
    empty: list[str] = []
    try:
        for run in read():
            if not _land(out, run, campaign):
                empty.append(f"{run.run_id} ({run.name!r}, {run.status}, {len(run.params)} parameters)")
    except NeedsLibrary:
        raise
    except (
        Exception
    ) as exc:  # a damaged store (SQLAlchemy's, sqlite3's, YAML's or MLflow's errors): said, not raised
        out.bad.append(
            BadLine(
                1,
                path.name,
                f"MLflow's client cannot read the store past here ({type(exc).__name__}: "
                f"{str(exc)[:300]}): the runs after it did not land",
            )
        )
    if empty:
        out.notes.append(
            f"{len(empty)} MLflow runs hold no training metric and no evaluation (parameters, tags or system "
            f"metrics only), so no run of honestscale: {'; '.join(empty[:10])}"
        )
        if not out.events and not out.bad:
            out.nothing_to_land = out.notes[-1]
    return out

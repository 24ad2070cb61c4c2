"""An MLflow tracking store read with MLflow's own client (an optional extra: ``pip install 'honestscale[mlflow]'``,
``mlflow-skinny`` with SQLAlchemy and Alembic beside it for its SQL stores): ``MlflowClient`` on a copy of the
SQLite file (its journal or write-ahead log copied beside it, so the copy is the store as its writer left it and the
user's file is never touched by a read), experiments and runs read page by page, each metric's whole history.
Nothing here reads MLflow's tables with SQL of its own.

MLflow's file store (``mlruns/<experiment id>/<run id>/``, in maintenance since MLflow 3: its client opens one only
with ``MLFLOW_ALLOW_FILE_STORE=true``, which the reader sets while it reads) is read a run at a time, from its
``meta.yaml``: the run's folder (its artifacts left out) and its experiment's ``meta.yaml`` are copied into a store
of their own, which MLflow's ``FileStore`` reads (it would make a ``.trash`` folder in the user's store otherwise).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from honestscale.collector._parsed import NeedsLibrary
from honestscale.files import sqlite_copy

_PAGE = 200  # runs per page of search_runs: bounded memory on stores of thousands of runs
FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"


@dataclass(frozen=True, slots=True)
class Point:
    key: str
    value: float
    timestamp_ms: int
    step: int


class Points:
    """Every metric's history of a run, in the order of time and step, held as columns (a run of 10^6 values is 24
    MB here, not 10^6 objects beside MLflow's own); each point made as it is read."""

    _CHUNK = 1 << 16

    def __init__(self) -> None:
        self.keys: list[str] = []
        empty = np.empty(0, np.int64)
        self._columns: tuple[np.ndarray, ...] = (empty, empty, empty, np.empty(0, np.float64))
        self._parts: list[tuple[np.ndarray, ...]] = []

    def add(self, key: str, history: list[Any]) -> None:
        """One metric's history, as MLflow's client returns it (``Metric`` entities)."""
        n = len(history)
        index = np.full(n, len(self.keys), np.int64)
        self.keys.append(key)
        times = np.fromiter((m.timestamp for m in history), np.int64, n)
        steps = np.fromiter((m.step for m in history), np.int64, n)
        values = np.fromiter((m.value for m in history), np.float64, n)
        self._parts.append((index, times, steps, values))

    def done(self) -> None:
        """The histories in one order: by time, then step (a stable sort: a metric's own order kept at a tie)."""
        if self._parts:
            index, times, steps, values = (np.concatenate(c) for c in zip(*self._parts, strict=True))
            order = np.lexsort((steps, times))
            self._columns = (index[order], times[order], steps[order], values[order])
        self._parts = []

    def __len__(self) -> int:
        return len(self._columns[0])

    def __iter__(self) -> Iterator[Point]:
        index, times, steps, values = self._columns
        for at in range(0, len(index), self._CHUNK):
            part = slice(at, at + self._CHUNK)
            for k, t, s, v in zip(
                index[part].tolist(),
                times[part].tolist(),
                steps[part].tolist(),
                values[part].tolist(),
                strict=True,
            ):
                yield Point(self.keys[k], v, t, s)


@dataclass
class Run:
    """One MLflow run as its store holds it."""

    run_id: str
    name: str
    experiment: str
    status: str  # RUNNING, SCHEDULED, FINISHED, FAILED, KILLED
    start_ms: int | None
    end_ms: int | None
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    points: Points = field(default_factory=Points)  # every metric's history, in the order of time and step


def _client(uri: str) -> Any:
    try:
        from mlflow.entities import ViewType
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise NeedsLibrary("mlflow-skinny", "mlflow", str(exc)) from exc
    _quiet()  # after the import: importing MLflow sets its loggers' levels (INFO) anew
    return MlflowClient(tracking_uri=uri), ViewType


def _quiet() -> None:
    """MLflow's and Alembic's INFO lines and SQLAlchemy's deprecation warnings about MLflow's own mappings are
    theirs, not the user's: kept off the ingest's output."""
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"mlflow\.")


def runs(path: Path) -> Iterator[Run]:
    """Every run of every experiment (deleted ones too: a reader must not lose them), with its metrics' histories."""
    with sqlite_copy(path, prefix="honestscale-mlflow-") as copy:
        _quiet()
        client, view = _client(f"sqlite:///{copy}")
        for experiment in client.search_experiments(view_type=view.ALL):
            token = None
            while True:
                page = client.search_runs(
                    [experiment.experiment_id], run_view_type=view.ALL, max_results=_PAGE, page_token=token
                )
                for run in page:
                    yield _run(client, experiment.name, run)
                token = page.token
                if not token:
                    break


def _run(client: Any, experiment: str, run: Any) -> Run:
    info = run.info
    got = Run(
        info.run_id,
        info.run_name or info.run_id,
        experiment,
        info.status,
        info.start_time,
        info.end_time,
        dict(run.data.params),
        dict(run.data.tags),
    )
    for key in sorted(run.data.metrics):
        got.points.add(key, client.get_metric_history(info.run_id, key))
    got.points.done()
    return got


@contextmanager
def allowed() -> Iterator[None]:
    """MLflow's file store, which its client refuses unless ``MLFLOW_ALLOW_FILE_STORE`` is true, opened for this read
    (the variable set back as it was after)."""
    was = os.environ.get(FILE_STORE)
    os.environ[FILE_STORE] = "true"
    try:
        yield
    finally:
        if was is None:
            os.environ.pop(FILE_STORE, None)
        else:
            os.environ[FILE_STORE] = was


def file_store_run(meta: Path) -> Run:
    """The run whose ``meta.yaml`` this is (``mlruns/<experiment id>/<run id>/meta.yaml``), with its metrics'
    histories, read by MLflow's client from a copy of its folder and of its experiment's ``meta.yaml``."""
    folder, experiment = meta.parent, meta.parent.parent
    with tempfile.TemporaryDirectory(prefix="honestscale-mlruns-") as tmp:
        root = Path(tmp) / "mlruns"
        copy = root / experiment.name / folder.name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("artifacts"))
        # MLflow's client takes a run folder only with these (a copy without empty folders, such as git's, has none)
        for part in ("artifacts", "metrics", "params", "tags"):
            (copy / part).mkdir(exist_ok=True)
        if (described := experiment / "meta.yaml").is_file():
            shutil.copyfile(described, root / experiment.name / "meta.yaml")
        _quiet()
        with allowed():
            client, _ = _client(f"file://{root}")
            name = client.get_experiment(experiment.name).name
            return _run(client, name, client.get_run(folder.name))

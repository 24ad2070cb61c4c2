"""An MLflow tracking store read with MLflow's own client (an optional extra: ``pip install 'honestscale[mlflow]'``,
``mlflow-skinny`` with SQLAlchemy and Alembic beside it for its SQL stores): ``MlflowClient`` on a copy of the
SQLite file (its journal or write-ahead log copied beside it, so the copy is the store as its writer left it and the
user's file is never touched by a read), experiments and runs read page by page, each metric's whole history.
Nothing here reads MLflow's tables with SQL of its own.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import NeedsLibrary

_PAGE = 200  # runs per page of search_runs: bounded memory on stores of thousands of runs
_BESIDE = ("-journal", "-wal", "-shm")  # SQLite's files beside the database while a writer has it open


@dataclass(frozen=True)
class Point:
    key: str
    value: float
    timestamp_ms: int
    step: int


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
    points: list[Point] = field(default_factory=list)  # every metric's history, in the order of time and step


def _client(uri: str) -> Any:
    try:
        from mlflow.entities import ViewType
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise NeedsLibrary("mlflow-skinny", "mlflow", str(exc)) from exc
    return MlflowClient(tracking_uri=uri), ViewType


@contextmanager
def _copy(path: Path) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="honestscale-mlflow-") as folder:
        copy = Path(folder) / path.name
        shutil.copyfile(path, copy)
        for tail in _BESIDE:
            if (beside := path.with_name(path.name + tail)).is_file():
                shutil.copyfile(beside, copy.with_name(copy.name + tail))
        yield copy


def _quiet() -> None:
    """MLflow's and Alembic's INFO lines and SQLAlchemy's deprecation warnings about MLflow's own mappings are
    theirs, not the user's: kept off the ingest's output."""
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"mlflow\.")


def runs(path: Path) -> Iterator[Run]:
    """Every run of every experiment (deleted ones too: a reader must not lose them), with its metrics' histories."""
    with _copy(path) as copy:
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
        got.points.extend(
            Point(m.key, m.value, m.timestamp, m.step) for m in client.get_metric_history(info.run_id, key)
        )
    got.points.sort(key=lambda p: (p.timestamp_ms, p.step))
    return got

"""The lint's verdicts written back where people look: tags on each judged run in the tracker it came from.

``honestscale lint --annotate mlflow`` plans, for each run read from an MLflow store (``mlflow:<run id>``: its SQLite
file, or its file store, where MLflow writes each tag as a file of the run's ``tags/`` folder), the tags
below from the rules about exactly that run, reads the tags the run carries now with MLflow's own client, and
shows what would change; ``--write`` sets them. It only ever sets these tags (never a metric, a parameter or another
tag), only where a value differs, so a second call changes nothing. A run the store no longer has is named, never
created.

* ``honestscale.verdict``: ``fail`` where a rule fails on the run, else ``cannot verify`` where one cannot be
  verified, else ``pass``;
* ``honestscale.failed`` and ``honestscale.cannot_verify``: the rules' codes (``none``);
* ``honestscale.quote``: ``do not quote: error-severity HS... fails`` where an error-severity rule fails, as the
  report marks such numbers; else ``no error-severity rule fails: quote it with the rules above``;
* a run counted as another (the callback's recording of the same training, which supersedes the tracker's):
  ``honestscale.verdict`` ``superseded`` and ``honestscale.superseded``, why and which run is judged instead.

Weights & Biases runs are planned the same way (``--annotate wandb``), as a dry run only: an offline run folder
cannot be written by W&B's public API. :func:`wandb_code` prints what a user with a W&B server runs after ``wandb
sync``: the same keys in each run's summary, for every W&B run of the training (a group's runs, one per rank).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honestscale.analysis.points import Findings, do_not_quote, lint_codes
from honestscale.errors import HonestscaleError
from honestscale.files import sqlite_copy
from honestscale.view import Run

PREFIX = "honestscale."
_TRACKERS = {"mlflow": (("mlflow-sqlite", "mlflow-files"), "mlflow:")}


@dataclass(frozen=True)
class Annotation:
    tracker: str
    store: Path
    tracker_run: str  # the tracker's own run id
    run_id: str  # honestscale's
    tags: dict[str, str]  # what the run should carry
    now: dict[str, str | None]  # what it carries now (None: no such tag)
    missing: bool = False  # the store no longer has the run

    @property
    def changes(self) -> dict[str, str]:
        return {k: v for k, v in self.tags.items() if self.now.get(k) != v}


def tags_for(codes: dict[str, list[str]]) -> dict[str, str]:
    """The tags that say the rules' verdicts about one run (``codes``: :func:`lint_codes`'s)."""
    verdict = "fail" if codes["fail"] else "cannot verify" if codes["cannot_verify"] else "pass"
    return {
        f"{PREFIX}verdict": verdict,
        f"{PREFIX}failed": ", ".join(codes["fail"]) or "none",
        f"{PREFIX}cannot_verify": ", ".join(codes["cannot_verify"]) or "none",
        f"{PREFIX}quote": do_not_quote(codes)
        or "no error-severity rule fails: quote it with the rules above",
    }


def _client(store: Path) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise HonestscaleError(
            f"writing the verdicts into {store} needs MLflow's client ({exc})",
            "pip install 'honestscale[mlflow]'",
        ) from exc
    if store.name == "meta.yaml":  # a run of MLflow's file store: mlruns/<experiment>/<run>/meta.yaml
        # its client opens a file store only with this set; this command's own process, asked to annotate it
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        return MlflowClient(tracking_uri=f"file://{store.parent.parent.parent}")
    return MlflowClient(tracking_uri=f"sqlite:///{store}")


def _now(client: Any, run: str, keys: Iterable[str]) -> tuple[dict[str, str | None], bool]:
    from mlflow.exceptions import MlflowException

    try:
        tags = client.get_run(run).data.tags
    except MlflowException:
        return {}, True
    return {k: tags.get(k) for k in keys}, False


def plan(tracker: str, runs: list[Run], findings: Findings, superseded: dict[str, str]) -> list[Annotation]:
    """For each run read from ``tracker``: the tags it should carry and those it carries now. A run superseded by
    another (the callback's recording of the same training) is judged as that run: its tags say so and name it."""
    if tracker not in _TRACKERS:
        raise HonestscaleError(f"--annotate {tracker}: no such tracker", f"one of {', '.join(_TRACKERS)}")
    sources, prefix = _TRACKERS[tracker]
    mine = [r for r in runs if r.source in sources and r.id.startswith(prefix) and r.source_file]
    with ExitStack() as copies:
        clients: dict[Path, Any] = {}

        def client_of(store: Path) -> Any:
            """A client on a copy of the SQLite store (held open while the plan is made): the dry run never opens
            the user's file, which SQLite would change by rolling back a journal its writer left."""
            if store not in clients:
                read = store if store.name == "meta.yaml" else copies.enter_context(sqlite_copy(store))
                clients[store] = _client(read)
            return clients[store]

        return [_planned(tracker, prefix, run, findings, superseded, client_of) for run in
                sorted(mine, key=lambda r: (str(r.source_file), r.id))]  # fmt: skip


def _planned(
    tracker: str,
    prefix: str,
    run: Run,
    findings: Findings,
    superseded: dict[str, str],
    client_of: Callable[[Path], Any],
) -> Annotation:
    """One run's tags, and those it carries now."""
    store = Path(str(run.source_file))
    if not store.is_file():
        raise HonestscaleError(
            f"run {run.id} came from {store}, which is not there any more",
            "ingest the store again where it is now, then annotate",
        )
    client = client_of(store)
    tags = (
        {f"{PREFIX}verdict": "superseded", f"{PREFIX}superseded": superseded[run.id]}
        if run.id in superseded
        else tags_for(lint_codes(findings, {run.id}))
    )
    tracker_run = run.id.removeprefix(prefix)
    now, missing = _now(client, tracker_run, tags)
    return Annotation(tracker, store, tracker_run, run.id, tags, now, missing)


def write(annotations: list[Annotation]) -> int:
    """Set every changed tag (never another); the number of tags set."""
    written = 0
    clients: dict[Path, Any] = {}
    for a in annotations:
        if a.missing:
            continue
        client = clients.setdefault(a.store, _client(a.store))
        for key, value in a.changes.items():
            client.set_tag(a.tracker_run, key, value)
            written += 1
    return written


@dataclass(frozen=True)
class WandbPlan:
    run_id: str  # honestscale's
    project: str | None
    group: str | None
    wandb_run: str | None  # the W&B run of a training that is no group's
    tags: dict[str, str]


def plan_wandb(runs: list[Run], findings: Findings, superseded: dict[str, str]) -> list[WandbPlan]:
    """For each run read from W&B offline files: the verdict keys it should carry (a dry run: nothing is read from
    or written to W&B)."""
    got = []
    for run in sorted((r for r in runs if r.source == "wandb-offline"), key=lambda r: r.id):
        got_imported = run.imported
        said: dict[str, Any] = got_imported if isinstance(got_imported, dict) else {}
        tags = (
            {f"{PREFIX}verdict": "superseded", f"{PREFIX}superseded": superseded[run.id]}
            if run.id in superseded
            else tags_for(lint_codes(findings, {run.id}))
        )
        group = said.get("group")
        got.append(
            WandbPlan(run.id, said.get("project"), group, None if group else said.get("wandb_run"), tags)
        )
    return got


def wandb_code(plan: WandbPlan) -> str:
    """The few lines a user with a W&B server runs, after ``wandb sync`` of the run folders, to set ``plan``."""
    where = (
        f'api.runs("ENTITY/{plan.project}", filters={{"group": {plan.group!r}}})'
        if plan.group
        else f'[api.run("ENTITY/{plan.project}/{plan.wandb_run}")]'
    )
    return f"for run in {where}:\n    run.summary.update({plan.tags!r})\n    run.update()"

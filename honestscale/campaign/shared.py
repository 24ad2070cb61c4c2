"""What `campaign run`, `campaign submit` and `probe` share: the spec checked against each runner's own options,
the spec and the runs it plans recorded in the store, the tuning study's best trial, and how precise each point
came out. Nothing here prints: what a user must read comes back as text (``notify``) or as data for the CLI.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from honestscale.campaign import launch
from honestscale.campaign import spec as _campaign
from honestscale.errors import HonestscaleError
from honestscale.store import campaigns, resolve_store_path

if TYPE_CHECKING:  # the campaign's stages import polars: not at start-up, for every command
    from honestscale.campaign.stages import Best
    from honestscale.store import Connection

Notify = Callable[[str], None]


@dataclass(frozen=True)
class StoreAccess:
    """How orchestration reaches the store the user named: ``open(read_only)`` a connection (waiting for a writer as
    the user asked), and whether it ``exists()`` yet (a dry run never creates one)."""

    open: Callable[[bool], AbstractContextManager[Connection]]
    exists: Callable[[], bool]


def reaching(opener: Callable[[bool], AbstractContextManager[Connection]], store: Path | None) -> StoreAccess:
    """The store ``store`` names (the default one where None), opened by ``opener``."""
    return StoreAccess(opener, lambda: resolve_store_path(store).exists())


def runs_not_ok(store: StoreAccess, campaign: str) -> list[str]:
    """The campaign's runs that did not end in success, as the store has them."""
    with store.open(True) as con:
        return campaigns.runs_not_ok(con, campaign)


def runner_options(framework: str) -> set[str]:
    """The option names (argparse dests) the framework's runner accepts; its flavour option is the launcher's."""
    if framework not in launch.RUNNERS:
        raise HonestscaleError(
            f"framework {framework!r} has no runner", f"one of: {', '.join(launch.RUNNERS)}"
        )
    # runner modules import their framework inside functions: the parser is there without it
    parser = importlib.import_module(launch.RUNNERS[framework]).build_parser()
    return {a.dest for a in parser._actions if a.dest not in ("help", "distributed")}


def load(path: Path) -> _campaign.Spec:
    """The campaign spec at ``path``, its keys checked against the runners' own options."""
    return _campaign.load(path, runner_options)


def argv_error(framework: str, argv: list[str]) -> str | None:
    """What the framework's runner would refuse in ``argv`` (its own parser, without importing the framework)."""
    if framework not in launch.RUNNERS:
        return None  # launch names the frameworks there are
    runner = importlib.import_module(launch.RUNNERS[framework])
    parser = runner.build_parser()
    said = io.StringIO()
    full = [*launch.RUNNER_ARGS.get(framework, ()), *argv]
    try:
        with contextlib.redirect_stderr(said):
            args = parser.parse_args(full)
    except SystemExit as exc:
        if exc.code == 0:
            return None
        lines = said.getvalue().strip().splitlines()
        return lines[-1].split(": error: ", 1)[-1] if lines else "refused by the runner"
    settle = getattr(
        runner, "settle_args", None
    )  # what the runner refuses after parsing (options of one model)
    return None if settle is None else settle(args, parser)


def check_runner_args(s: _campaign.Spec, plans: list[_campaign.RunPlan]) -> None:
    """Every run's options parsed by its runner's own parser before anything starts (epochs = 0 is refused
    here, not in a traceback in every rank's log)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for plan in plans:
        argv = plan.runner_argv(s.out, s.name, s.scaling)
        if (plan.framework, tuple(argv)) in seen:  # the same options are parsed once
            continue
        seen.add((plan.framework, tuple(argv)))
        if (why := argv_error(plan.framework, [*argv, "--run-id", plan.run_id])) is not None:
            raise _campaign.SpecError(
                f"{s.path}: run {plan.run_id}: {why}", "fix that value in [args], [grid] or [tuning]"
            )


@dataclass(frozen=True)
class Superseded:
    """Runs an earlier version of the spec planned and this one does not: kept, marked, in no statistic."""

    campaign: str
    runs: list[str]
    reason: str  # what changed between the two specs

    def describe(self) -> str:
        shown = ", ".join(self.runs[:5]) + (f" and {len(self.runs) - 5} more" if len(self.runs) > 5 else "")
        return (f"the spec of {self.campaign} changed ({self.reason}): {len(self.runs)} run(s) of the earlier spec "
                f"are superseded, kept in the store and left out of every summary, verdict and report: {shown} "
                f"(`honestscale runs --campaign {self.campaign}` lists them)")  # fmt: skip


def record_spec(store: StoreAccess, s: _campaign.Spec) -> Superseded | None:
    """The spec and every run it plans go to the store: the linter tells a dropped run from one never planned.

    Runs an earlier version of the spec planned, and this one does not, are marked superseded (kept, in no
    statistic) and returned with what changed.
    """
    plans = s.plans()
    record = {**s.raw, "spec_path": str(s.path.resolve()), "planned_runs": [p.run_id for p in plans]}
    with store.open(False) as con:
        before = campaigns.previous_spec(con, s.name)
        reason = spec_changes(json.loads(before) if before else {}, s.raw)
        marked = campaigns.record_campaign(
            con, s.name, json.dumps(record, default=str), sorted({p.series for p in plans}), reason
        )
    return Superseded(s.name, marked, reason) if marked else None


def spec_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What differs between two specs' tables, e.g. ``args.model 'mlp' -> 'cnn'``."""
    changes = []
    for table in ("campaign", "args", "grid", "tuning"):
        old, new = before.get(table) or {}, after.get(table) or {}
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key) and key not in ("description", "until_ci", "max_repetitions"):
                changes.append(f"{table}.{key} {old.get(key)!r} -> {new.get(key)!r}")
    text = "; ".join(changes) or "the runs it plans changed"
    return text if len(text) <= 500 else text[:497] + "..."


def precisions(con: Connection, s: _campaign.Spec) -> list[tuple[str, str]]:
    """With until_ci: every final point and how precise its median time came out."""
    from honestscale.campaign import repeat

    if s.until_ci is None:
        return []
    finals = [p for p in s.plans() if p.purpose == "final"]
    return [(point, p.describe()) for point, p in repeat.precisions(con, s, finals).items()]


def best_trial(store: StoreAccess, s: _campaign.Spec, notify: Notify) -> Best:
    """The tuning study's best trial, said with its accuracy: it is used for every final run."""
    from honestscale.campaign import stages

    with store.open(True) as con:
        best = stages.best_trial(con, s)
    notify(f"tuning {(s.tuning or {}).get('name')}: best trial {best.trial} (validation accuracy "
           f"{best.validation_accuracy:.4f} over {best.runs} run(s)); used for every final run")  # fmt: skip
    return best

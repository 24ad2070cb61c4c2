"""``lint --annotate TRACKER``: the verdict tags each run read from a tracker would get there, printed, and set
where ``--write`` says so (honestscale.lint.annotate plans and writes them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from honestscale.cli._app import err

if TYPE_CHECKING:
    from honestscale.judged import Findings


def annotated(
    tracker: str, runs: list[Any], superseded: dict[str, str], findings: Findings, write: bool
) -> None:
    """The verdict tags of each run read from the tracker: shown, and set where --write says so."""
    from honestscale.lint import annotate as annotating

    if tracker == "wandb":
        _wandb(runs, superseded, findings, write)
        return
    plan = annotating.plan(tracker, runs, findings, superseded)
    for a in plan:
        if a.missing:
            err.print(
                f"[yellow]{tracker} run {a.tracker_run}[/] ({a.run_id}) is not in {a.store} any more: skipped"
            )
            continue
        said = ", ".join(
            f"{k} = {v!r}" + (f" (was {a.now[k]!r})" if a.now.get(k) else "") for k, v in a.changes.items()
        )
        err.print(
            f"{tracker} run {a.tracker_run} in {a.store}: " + (said or "its tags already say it"),
            highlight=False,
        )
    changes = sum(len(a.changes) for a in plan if not a.missing)
    if not write:
        said = f"dry run: {changes} tags on {len(plan)} {tracker} runs would be set; nothing was written (add --write)"
        err.print(said, highlight=False)
        return
    written = annotating.write(plan)
    err.print(
        f"wrote {written} tags on {len(plan)} {tracker} runs (only honestscale.* tags; no metric)",
        highlight=False,
    )


def _wandb(runs: list[Any], superseded: dict[str, str], findings: Findings, write: bool) -> None:
    """W&B: the plan and the code that applies it on a W&B server (an offline run cannot be written)."""
    from honestscale.errors import HonestscaleError
    from honestscale.lint import annotate as annotating

    if write:
        raise HonestscaleError(
            "W&B offline runs cannot be written: W&B's public API writes only to a server",
            "run `lint --annotate wandb` without --write, `wandb sync` the run folders, then run the code it prints",
        )
    plan = annotating.plan_wandb(runs, findings, superseded)
    for p in plan:
        err.print(
            f"W&B {'group ' + repr(p.group) if p.group else 'run ' + str(p.wandb_run)} ({p.run_id}):",
            highlight=False,
        )
        err.print(annotating.wandb_code(p), highlight=False, markup=False)
    said = (
        f"dry run: {len(plan)} W&B trainings; an offline run cannot be written, so nothing was: `wandb sync` their "
        "folders to your W&B server, then run the code above with api = wandb.Api()"
    )
    err.print(said, highlight=False)

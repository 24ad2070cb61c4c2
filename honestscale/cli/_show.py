"""What ``honestscale show RUN`` prints: one run's record, the rules' verdicts about it, its setup, evaluations and
step-time breakdown per rank."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from honestscale.cli._output import _fmt_seconds, _name
from honestscale.display import shown, shown_text
from honestscale.judged import (
    FIELDS,
    STEP_COLUMNS,
    RunRecord,
    Verdicts,
    energy_text,
    extremes,
    num,
    steady_text,
    step_shares,
)

if TYPE_CHECKING:  # polars is imported where a table is made: not at start-up, for every command
    import polars as pl

MANY_RANKS = 16
Row = Mapping[str, object]


def _few_ranks(rows: Sequence[Row], all_ranks: bool) -> tuple[Sequence[Row], Text | None]:
    """Every rank's row, or for a run of many ranks the 3 slowest and 3 fastest (by samples/s) and the spread."""
    if all_ranks or len(rows) <= MANY_RANKS:
        return rows, None
    shown, note = extremes(rows)
    return shown, Text(note + "; --ranks lists them all", style="dim")


_OUTCOME_TEXT = {"fail": ("✗ fails", "red"), "cannot_verify": ("? cannot verify", "yellow")}


def show_verdicts(got: Verdicts) -> list[Text]:
    """``show``'s verdicts: the rules' findings that name the run, as the dashboard's run page lists them."""
    findings = got.findings
    if not findings:
        return [
            Text(
                f"verdicts: no rule fails or cannot be verified on this run (judged with "
                f"{shown(got.judged_with)})",
                style="green",
            )
        ]
    lines = [
        Text(
            f"verdicts on this run ({len(findings)} finding(s), judged with {shown(got.judged_with)}):",
            style="bold",
        )
    ]
    for f in findings:
        line = Text("  ")
        line.append(f"{f['code']} ", style="bold")
        if f["suppressed"]:
            line.append(f"suppressed ({shown_text(f['suppressed']['reason'])}) ", style="dim")
        else:
            word, style = _OUTCOME_TEXT.get(f["outcome"], (f["outcome"], ""))
            line.append(f"{word} ", style=style)
        line.append(f"({f['severity']}): {shown_text(f['message'].removeprefix('cannot verify: '))}")
        lines.append(line)
        if not f["suppressed"] and f.get("fix"):
            lines.append(Text(f"      fix: {shown_text(f['fix'])}", style="dim"))
    return lines


def show_renderable(rec: RunRecord, *, all_ranks: bool = False) -> Group:
    """``show``'s page of one run: its verdicts, its facts, evaluations, step split, profiler evidence and gaps."""
    from honestscale.judged import kind_words

    parts: list[Any] = [*show_verdicts(rec.verdicts), _facts(rec)]
    for c in rec.series:  # the scaling series it is a point of, its kind, and a label's split
        workers = ", ".join(map(str, c.workers))
        parts.append(
            Text(f"a point of the series {c.series} ({kind_words(c.kind)} scaling; workers {workers})")
        )
        if c.split:
            parts.append(Text(f"  that series is {c.split}", style="yellow"))
    parts.append(
        _evaluations(rec.evals, all_ranks) if rec.evals else Text("no evaluations recorded", style="yellow")
    )
    if rec.step_breakdown:
        parts += _step_split(rec, all_ranks)
    else:
        parts.append(Text("no step events: no step-time breakdown", style="yellow"))
    if rec.profiled_steps:
        parts.append(_profile_table(rec.profiled_steps))
    parts += _gaps(rec.events_per_rank, all_ranks)
    return Group(*parts)


def _facts(rec: RunRecord) -> Table:
    """The run's fields, its energy to train (or why none) and its software."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    for key in FIELDS:
        value = rec.facts.get(key)
        if value is None:
            continue
        if key == "time_to_train_s" and (seconds := num(value)) is not None:
            mark = " ✗ HS213: no measurement (see the verdicts)" if rec.rejected else ""
            paused = num(rec.facts.get("paused_s"))
            left_out = f", the {_fmt_seconds(paused)} between its launches left out" if paused else ""
            value = f"{seconds:.3f} s ({_fmt_seconds(seconds)}{left_out})" + mark
        elif key == "paused_s" and (seconds := num(value)) is not None:
            value = f"{seconds:.3f} s between the launches of a resumed training (not training)"
        facts.add_row(key, _name(value))
    spent = rec.energy_to_train
    if spent:
        facts.add_row("energy_to_train", energy_text(spent))
        if spent.get("joules") is not None and spent.get("joined"):
            facts.add_row("energy_joined", _name(spent["joined"]))
    if rec.software:
        facts.add_row("software", _name(", ".join(f"{k} {v}" for k, v in rec.software.items())))
    return facts


def _evaluations(all_evals: Sequence[Row], all_ranks: bool) -> Table:
    """The run's evaluations (the first rank's only when there are many ranks, unless --ranks)."""
    ev_table = Table(title="evaluations", title_justify="left")
    for col in ("epoch", "rank", "split", "metric", "value", "samples"):
        ev_table.add_column(col)
    evals = all_evals
    ranks = {num(e["rank"]) or 0 for e in evals}
    if not all_ranks and len(ranks) > MANY_RANKS:
        first = min(ranks)
        evals = [e for e in evals if e["rank"] == first]
        ev_table.caption = f"rank {first:g} only, of {len(ranks):,}; --ranks lists all"
    for e in evals:
        ev_table.add_row(
            str(e["epoch"] if e["epoch"] is not None else "-"),
            str(e["rank"]),
            _name(e["split"]),
            _name(e["metric"]),
            f"{num(e['value']):.5g}",
            str(e["samples"] or "-"),
        )
    return ev_table


def _step_split(rec: RunRecord, all_ranks: bool) -> list[Any]:
    """Where each rank's step time goes (warm-up excluded), with the steady state the steps reach."""
    st = Table(title="step time breakdown (warm-up excluded)", title_justify="left")
    for col in STEP_COLUMNS:
        st.add_column(col, justify="right")
    shown, note = _few_ranks(rec.step_breakdown, all_ranks)
    for s in shown:
        st.add_row(*step_shares(s))
    parts: list[Any] = [st]
    if note is not None:
        parts.append(note)
    if (ss := rec.steady_state) is not None:
        parts.append(Text(steady_text(ss), style="" if ss["detected_warmup_steps"] is not None else "yellow"))
    return parts


def _gaps(per_rank: Sequence[Row], all_ranks: bool) -> list[Text]:
    """The ranks that lost events (a count when there are many, unless --ranks)."""
    gaps = [c for c in per_rank if c["missing"]]
    if len(gaps) > MANY_RANKS and not all_ranks:
        lost = sum(num(c["missing"]) or 0 for c in gaps)
        return [
            Text(f"{len(gaps):,} ranks lost events ({lost:,.0f} in all); --ranks lists them", style="yellow")
        ]
    return [
        Text(
            f"rank {c['rank']}: {c['missing']} events missing between seq {c['first_seq']} and {c['last_seq']}",
            style="yellow",
        )
        for c in gaps
    ]


def _profile_table(rows: Sequence[Row]) -> Table:
    """The run's profiled steps (PyTorch profiler traces): evidence beside its step split."""
    t = Table(
        title="profiler evidence (PyTorch profiler traces)",
        title_justify="left",
        caption="device busy/idle: kernels, copies and sets in the step's window; collectives: in flight "
        "(overlapping compute), exposed: no other kernel beside them",
        caption_justify="left",
    )
    for col in ("rank", "step", "step s", "device busy", "idle", "collectives", "exposed", "by kind"):
        t.add_column(col, justify="right" if col not in ("by kind",) else "left")
    for r in rows:
        step = num(r["t_step"]) or 0.0

        def pct(v: object, step: float = step) -> str:
            got = num(v)
            return "-" if got is None or not step else f"{100 * got / step:.1f}%"

        kinds = json.loads(str(r["comm_by_kind"])) if r.get("comm_by_kind") else {}
        t.add_row(
            str(r["rank"]),
            str(r["step"]),
            f"{step:.4g}",
            pct(r["t_busy"]),
            pct(r["t_idle"]),
            pct(r["t_comm"]),
            pct(r["t_comm_exposed"]),
            ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in sorted(kinds.items())) or "none",
        )
    return t


def profiles_table(df: pl.DataFrame) -> Table:
    unlinked = df.filter(df["run_id"].is_null()).height
    table = Table(
        title=f"{df.height} profiler trace(s), {unlinked} linked to no run",
        title_justify="left",
        caption="shares of the profiled steps' summed time; busy: the device's kernels, copies and sets; "
        "collectives: in flight; exposed: no other kernel beside them",
        caption_justify="left",
    )
    for col in ("file", "run", "rank", "device", "steps", "step time", "busy", "collectives", "exposed"):
        table.add_column(
            col, overflow="fold", justify="left" if col in ("file", "run", "device") else "right"
        )
    for r in df.iter_rows(named=True):
        total = r["t_steps"] or 0.0

        def share(v: float | None, total: float = total) -> str:
            return "-" if v is None or not total else f"{100 * v / total:.1f}%"

        table.add_row(
            _name(r["path"]),
            _name(r["run_id"] or "linked to no run"),
            str(r["rank"] if r["rank"] is not None else "-"),
            _name(f"{r['device']} ({r['backend'] or '?'})"),
            str(r["steps"]),
            _fmt_seconds(total),
            share(r["t_busy"]),
            share(r["t_comm"]),
            share(r["t_comm_exposed"]),
        )
    return table

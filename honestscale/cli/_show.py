"""What ``honestscale show RUN`` prints: one run's record, the rules' verdicts about it, its setup, evaluations and
step-time breakdown per rank."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from honestscale.analysis import steady
from honestscale.cli._output import _fmt_seconds, _name, iso
from honestscale.display import shown, shown_text

if TYPE_CHECKING:  # polars is imported where a table is made: not at start-up, for every command
    import polars as pl

_SHOW_FIELDS = (
    "run_id",
    "source",
    "campaign",
    "name",
    "purpose",
    "status",
    "reason",
    "framework",
    "framework_version",
    "launcher",
    "backend",
    "world_size",
    "n_nodes",
    "accelerators_per_node",
    "n_accelerators",
    "accelerator",
    "system",
    "host",
    "cpu",
    "interconnect",
    "intra_op_threads",
    "inter_op_threads",
    "cpus_allowed",
    "launch_env",
    "model",
    "model_params",
    "dataset",
    "train_size",
    "validation_size",
    "test_size",
    "data_source",
    "data_path",
    "global_batch_size",
    "local_batch_size",
    "optimizer",
    "learning_rate",
    "lr_schedule",
    "precision",
    "grad_compression",
    "seed",
    "stop_criterion",
    "stop_value",
    "target_metric",
    "scope",
    "scaling",
    "config_hash",
    "git_commit",
    "slurm_job_id",
    "slurm_step_id",
    "ranks_seen",
    "ranks_stopped",
    "started_at",
    "stopped_at",
    "time_to_train_s",
    "source_file",
)


def show_record(
    run: dict[str, Any],
    evals: pl.DataFrame,
    steps: pl.DataFrame,
    counts: pl.DataFrame,
    series: pl.DataFrame | None = None,
    profiled: pl.DataFrame | None = None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {k: run.get(k) for k in _SHOW_FIELDS}
    rec["started_at"], rec["stopped_at"] = iso(run["started_at"]), iso(run["stopped_at"])
    for key in ("software", "input_shape"):
        rec[key] = json.loads(run[key]) if run.get(key) else None
    rec["final_accuracy"] = (
        {"split": run["final_split"], "metric": run["final_metric"], "value": run["final_value"]}
        if run["final_value"] is not None
        else None
    )
    rec["evals"] = evals.to_dicts()
    rec["step_breakdown"] = steps.to_dicts()
    rec["events_per_rank"] = counts.to_dicts()
    rec["steady_state"] = (
        steady.of_steps(
            series["t_total"].to_list(), int(series["warmup"].sum()), max(series["iterations"].to_list())
        ).as_json()
        if series is not None and len(series)
        else None
    )
    rec["profiled_steps"] = profiled.to_dicts() if profiled is not None else []
    return rec


MANY_RANKS = 16


def _few_ranks(rows: list[dict[str, Any]], all_ranks: bool) -> tuple[list[dict[str, Any]], Text | None]:
    """Every rank's row, or for a run of many ranks the 3 slowest and 3 fastest (by samples/s) and the spread."""
    if all_ranks or len(rows) <= MANY_RANKS:
        return rows, None

    def rate(s: dict[str, Any]) -> float:
        return (s["samples"] or 0) / s["t_total"] if s["t_total"] else 0.0

    from honestscale.view import med

    ordered = sorted(rows, key=rate)
    rates = [rate(s) for s in ordered]
    middle = med(rates) or 0.0
    spread = f"{100 * (rates[-1] - rates[0]) / middle:.1f} % of the median" if middle else "unknown"
    note = Text(
        f"{len(rows):,} ranks: the 3 slowest and the 3 fastest by samples/s (slowest {rates[0]:,.1f}, median "
        f"{middle:,.1f}, fastest {rates[-1]:,.1f}; spread {spread}); --ranks lists them all",
        style="dim",
    )
    return ordered[:3] + ordered[-3:], note


_OUTCOME_TEXT = {"fail": ("✗ fails", "red"), "cannot_verify": ("? cannot verify", "yellow")}


def show_verdicts(rec: dict[str, Any]) -> list[Text]:
    """``show``'s verdicts: the rules' findings that name the run, as the dashboard's run page lists them."""
    got = rec.get("verdicts")
    if not got:
        return []
    findings = got["findings"]
    if not findings:
        return [
            Text(
                f"verdicts: no rule fails or cannot be verified on this run (judged with "
                f"{shown(got['judged_with'])})",
                style="green",
            )
        ]
    lines = [
        Text(
            f"verdicts on this run ({len(findings)} finding(s), judged with {shown(got['judged_with'])}):",
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


def _rejected_mark(rec: dict[str, Any]) -> str:
    """The mark after a time HS213 rejects (``show``'s verdicts say why), else nothing."""
    findings = (rec.get("verdicts") or {}).get("findings", ())
    found = any(f["code"] == "HS213" and f["outcome"] == "fail" for f in findings)
    return " ✗ HS213: no measurement (see the verdicts)" if found else ""


def show_renderable(rec: dict[str, Any], *, all_ranks: bool = False) -> Group:
    """``show``'s page of one run: its verdicts, its facts, evaluations, step split, profiler evidence and gaps."""
    from honestscale.view import kind_words

    parts: list[Any] = [*show_verdicts(rec), _facts(rec)]
    for c in rec.get("series") or []:  # the scaling series it is a point of, its kind, and a label's split
        kind = kind_words(c["kind"])
        workers = ", ".join(map(str, c["workers"]))
        parts.append(Text(f"a point of the series {c['series']} ({kind} scaling; workers {workers})"))
        if c["split"]:
            parts.append(Text(f"  that series is {c['split']}", style="yellow"))
    parts.append(
        _evaluations(rec, all_ranks) if rec["evals"] else Text("no evaluations recorded", style="yellow")
    )
    if rec["step_breakdown"]:
        parts += _step_split(rec, all_ranks)
    else:
        parts.append(Text("no step events: no step-time breakdown", style="yellow"))
    if rec.get("profiled_steps"):
        parts.append(_profile_table(rec["profiled_steps"]))
    parts += _gaps(rec, all_ranks)
    return Group(*parts)


def _facts(rec: dict[str, Any]) -> Table:
    """The run's fields, its energy to train (or why none) and its software."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    for key in _SHOW_FIELDS:
        value = rec.get(key)
        if value is None:
            continue
        if key == "time_to_train_s":
            value = f"{value:.3f} s ({_fmt_seconds(value)})" + _rejected_mark(rec)
        facts.add_row(key, _name(value))
    spent = rec.get("energy_to_train") or {}
    if spent.get("joules") is not None:
        ranks = spent.get("per_rank_joules") or {}
        facts.add_row(
            "energy_to_train",
            f"{spent['joules'] / 1e3:,.2f} kJ ({spent['source']}"
            + (f"; mean power {spent['mean_power_w']:,.0f} W" if spent.get("mean_power_w") else "")
            + (
                f"; per rank: {', '.join(f'{r}: {j / 1e3:,.2f} kJ' for r, j in ranks.items())}"
                if ranks
                else ""
            )
            + ")",
        )
        if spent.get("joined"):
            facts.add_row("energy_joined", _name(spent["joined"]))
    elif spent:
        facts.add_row("energy_to_train", spent["source"] + (f" ({spent['why']})" if spent.get("why") else ""))
    if rec.get("software"):
        facts.add_row("software", _name(", ".join(f"{k} {v}" for k, v in rec["software"].items())))
    return facts


def _evaluations(rec: dict[str, Any], all_ranks: bool) -> Table:
    """The run's evaluations (the first rank's only when there are many ranks, unless --ranks)."""
    ev_table = Table(title="evaluations", title_justify="left")
    for col in ("epoch", "rank", "split", "metric", "value", "samples"):
        ev_table.add_column(col)
    evals = rec["evals"]
    if not all_ranks and len({e["rank"] for e in evals}) > MANY_RANKS:
        first = min(e["rank"] for e in evals)
        evals = [e for e in evals if e["rank"] == first]
        ev_table.caption = (
            f"rank {first} only, of {len({e['rank'] for e in rec['evals']}):,}; --ranks lists all"
        )
    for e in evals:
        ev_table.add_row(
            str(e["epoch"] if e["epoch"] is not None else "-"),
            str(e["rank"]),
            _name(e["split"]),
            _name(e["metric"]),
            f"{e['value']:.5g}",
            str(e["samples"] or "-"),
        )
    return ev_table


def _step_split(rec: dict[str, Any], all_ranks: bool) -> list[Any]:
    """Where each rank's step time goes (warm-up excluded), with the steady state the steps reach."""
    st = Table(title="step time breakdown (warm-up excluded)", title_justify="left")
    for col in ("rank", "steps", "samples", "samples/s", "data", "compute", "comm", "optimizer", "other"):
        st.add_column(col, justify="right")
    shown, note = _few_ranks(rec["step_breakdown"], all_ranks)
    for s in shown:
        total = s["t_total"] or 0.0

        def pct(v: float | None, total: float = total) -> str:
            return "not measured" if v is None else "-" if not total else f"{100 * v / total:.1f}%"

        known = sum(s[k] or 0.0 for k in ("t_data", "t_compute", "t_comm", "t_optimizer"))
        comm = pct(s["t_comm"]) if s["comm_measured"] else "not measured"
        counted = s["samples"] is not None  # a log that counts no samples (tokens only): unknown, never 0
        st.add_row(
            str(s["rank"]),
            str(s["steps"]),
            str(s["samples"]) if counted else "not counted",
            f"{s['samples'] / total:.1f}" if total and counted else "-",
            pct(s["t_data"]),
            pct(s["t_compute"]),
            comm,
            pct(s["t_optimizer"]),
            pct(max(total - known, 0.0)),
        )
    parts: list[Any] = [st]
    if note is not None:
        parts.append(note)
    if (ss := rec.get("steady_state")) is not None:
        parts.append(
            Text(_steady_text(ss), style="" if ss["detected_warmup_steps"] is not None else "yellow")
        )
    return parts


def _gaps(rec: dict[str, Any], all_ranks: bool) -> list[Text]:
    """The ranks that lost events (a count when there are many, unless --ranks)."""
    gaps = [c for c in rec["events_per_rank"] if c["missing"]]
    if len(gaps) > MANY_RANKS and not all_ranks:
        lost = sum(c["missing"] for c in gaps)
        return [
            Text(f"{len(gaps):,} ranks lost events ({lost:,} in all); --ranks lists them", style="yellow")
        ]
    return [
        Text(
            f"rank {c['rank']}: {c['missing']} events missing between seq {c['first_seq']} and {c['last_seq']}",
            style="yellow",
        )
        for c in gaps
    ]


def _steady_text(ss: dict[str, Any]) -> str:
    marked = f"the run marks {ss['marked_warmup_steps']} warm-up step(s)"
    if ss["detected_warmup_steps"] is None:
        return f"steady state (first rank's {ss['steps']} steps): {ss['verdict']}; {marked}"
    interval = (
        f" [{ss['low_s']:.4g}, {ss['high_s']:.4g}] (95 %, {ss['batches']} batch means)"
        if ss["low_s"] is not None
        else " (too few steps for an interval)"
    )
    return (
        f"steady state (first rank's {ss['steps']} steps, MSER-5): warm-up ends after step "
        f"{ss['detected_warmup_steps']}, {marked}; mean step after it {ss['steady_step_s']:.4g} s{interval}"
    )


def _profile_table(rows: list[dict[str, Any]]) -> Table:
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
        step = r["t_step"] or 0.0

        def pct(v: float | None, step: float = step) -> str:
            return "-" if v is None or not step else f"{100 * v / step:.1f}%"

        kinds = json.loads(r["comm_by_kind"]) if r.get("comm_by_kind") else {}
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

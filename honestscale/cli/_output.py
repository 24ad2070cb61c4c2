"""Turning query results into what the CLI prints: JSON records, CSV, rich tables."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from honestscale.display import iso, json_text, shown
from honestscale.judged import UNREACHED, Reached, Target
from honestscale.spreadsheet import defuse

if TYPE_CHECKING:  # polars is imported where a table is made: not at start-up, for every command
    import polars as pl


def _target_text(target: list[Target] | None) -> str | None:
    if not target:
        return None
    return "; ".join(
        f"{t['split']} {t['metric']} {'>=' if t['better'] == 'higher' else '<='} {t['value']:g}"
        for t in target
    )


def _withhold(rec: dict[str, object], rejected: dict[str, object] | None) -> dict[str, object]:
    """The record with its times moved under ``rejected`` (with the rule and its reason) when a rule rejects them."""
    if rejected is None:
        rec["rejected"] = None
        return rec
    rec["rejected"] = {
        **rejected,
        "time_to_train_s": rec.get("time_to_train_s"),
        "time_to_accuracy_s": rec.get("time_to_accuracy_s"),
    }
    rec["time_to_train_s"] = rec["time_to_accuracy_s"] = None
    return rec


def with_energy(df: pl.DataFrame, energies: dict[str, dict[str, object]]) -> pl.DataFrame:
    """The runs with the energy to train `show` and the report give (every source, not only MLPerf's power logs)
    and where it comes from (``energy_source``: "not recorded" where none is)."""
    import polars as pl

    ids = df["run_id"].to_list()
    joules = pl.Series("energy_to_train_j", [energies.get(i, {}).get("joules") for i in ids], pl.Float64)
    sources = pl.Series("energy_source", [energies.get(i, {}).get("source") for i in ids], pl.String)
    return df.with_columns(joules).insert_column(df.columns.index("energy_to_train_j") + 1, sources)


def run_records(
    df: pl.DataFrame,
    targets: dict[str, Reached],
    rejected: dict[str, dict[str, object]] | None = None,
    rates: dict[str, dict[str, object]] | None = None,
) -> list[dict[str, object]]:
    """Runs as JSON-ready objects: timestamps in ISO 8601, the final accuracy as one object or null, the time to
    accuracy with the target it refers to (``reached``); times a rule rejects (``rejected_times``) are null, and
    ``rejected`` holds them with the rule and why."""
    out = []
    for row in df.iter_rows(named=True):
        rec = {k: v for k, v in row.items() if not k.startswith("final_")}
        got = targets.get(row["run_id"], UNREACHED)
        rec["time_to_accuracy_s"] = got["time_to_accuracy_s"]
        rec["target"] = got["target"]
        rec["started_at"] = iso(row["started_at"])
        rec["stopped_at"] = iso(row["stopped_at"])
        rec["final_accuracy"] = (
            {"split": row["final_split"], "metric": row["final_metric"], "value": row["final_value"]}
            if row["final_value"] is not None
            else None
        )
        # every metric's last value (Mask R-CNN: bbox_mAP and segm_mAP)
        rec["final_quality"] = json.loads(row["final_quality"]) if row.get("final_quality") else None
        rec |= (rates or {}).get(row["run_id"], {})
        out.append(_withhold(rec, (rejected or {}).get(row["run_id"])))
    return out


def runs_csv(
    df: pl.DataFrame, targets: dict[str, Reached], rejected: dict[str, dict[str, object]] | None = None
) -> str:
    """The runs as CSV: times as ISO text, the time to accuracy and its target (``reached``) beside the time to
    train, times a rule rejects (``rejected_times``) empty with the rule, why and the values in ``rejected``, and no
    text cell a spreadsheet would run as a formula."""
    import polars as pl

    ids = df["run_id"].to_list()
    rejected = rejected or {}
    at = df.columns.index("time_to_train_s") + 1
    df = df.insert_column(
        at,
        pl.Series(
            "time_to_accuracy_s",
            [targets.get(i, UNREACHED)["time_to_accuracy_s"] for i in ids],
            dtype=pl.Float64,
        ),
    ).insert_column(
        at + 1,
        pl.Series(
            "target", [_target_text(targets.get(i, UNREACHED)["target"]) for i in ids], dtype=pl.String
        ),
    )
    times = zip(ids, df["time_to_train_s"].to_list(), df["time_to_accuracy_s"].to_list(), strict=True)
    why = [_rejected_text(rejected.get(i), t, a) for i, t, a in times]
    gone = pl.Series([i in rejected for i in ids])
    df = df.with_columns(
        pl.when(gone).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("time_to_train_s", "time_to_accuracy_s")
    ).insert_column(at + 2, pl.Series("rejected", why, dtype=pl.String))
    df = df.with_columns(
        pl.col("started_at").map_elements(iso, return_dtype=pl.String),
        pl.col("stopped_at").map_elements(iso, return_dtype=pl.String),
    )
    text = [c for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(pl.col(c).map_elements(defuse, return_dtype=pl.String) for c in text).write_csv()


def _name(value: object) -> Text:
    """A name from the store as a cell: plain text (never rich markup), its bidirectional controls and other
    invisible characters as visible escapes (``display.shown``)."""
    return Text(shown(value))


def _rejected_text(rejected: dict[str, object] | None, ttt: float | None, tta: float | None) -> str | None:
    if rejected is None:
        return None
    values = "; ".join(
        f"{name} {v:g} s" for name, v in (("time to train", ttt), ("time to accuracy", tta)) if v is not None
    )
    return f"{rejected['rule']}: {rejected['reason']}" + (f" ({values}: not a measurement)" if values else "")


def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.2f} s"


def _time_cell(s: float | None, rejected: dict[str, object] | None) -> Text:
    """A time to train, or the rejected value marked with the rule that rejects it ("-22.00 s ✗ HS213")."""
    if rejected is None:
        return Text(_fmt_seconds(s))
    return Text(f"{_fmt_seconds(s)} ✗ {rejected['rule']}", style="red")


_STATUS_STYLE = {"success": "green", "aborted": "yellow", "incomplete": "yellow", "end_unknown": "yellow"}


def runs_table(df: pl.DataFrame, rejected: dict[str, dict[str, object]] | None = None) -> Table:
    """The runs, one a row; a time a rule rejects (``rejected_times``) is marked with the rule (✗ HS213), never
    printed as a measurement, and the rules and why are listed under the table."""
    table = Table(title=f"{df.height} runs", title_justify="left", show_lines=False)
    listed = set(df["run_id"].to_list())
    rejected = {k: v for k, v in (rejected or {}).items() if k in listed}
    if rejected:
        table.caption = Text(
            "\n".join(
                f"✗ {v['rule']} ({v['severity']}) {shown(k)}: {v['reason']}: its times are no measurement"
                for k, v in rejected.items()
            ),
            style="red",
            justify="left",
        )
    for col in ("run", "system", "framework", "workers", "accelerators", "batch", "status", "time to train"):
        table.add_column(col, overflow="fold")
    table.add_column("final quality", overflow="fold")
    layout = "parallel" in df.columns and df["parallel"].drop_nulls().len() > 0
    if layout:
        table.add_column("layout")
    slurm = "slurm_job_id" in df.columns and df["slurm_job_id"].drop_nulls().len() > 0
    if slurm:
        table.add_column("slurm job")
    for r in df.iter_rows(named=True):
        acc = (
            "-"
            if r["final_value"] is None
            else f"{r['final_value']:.4f} {r['final_split']} {shown(r['final_metric'])}"
        )
        accel = "-"
        if r["n_accelerators"] == 0:  # a CPU-only run: its workers are processes, not accelerators
            accel = "none (CPU)"
        elif r["n_accelerators"]:
            accel = f"{r['n_accelerators']} x {shown(r['accelerator'] or 'unknown model')}"
        status = Text(r["status"], style=_STATUS_STYLE.get(r["status"], "red"))
        if r.get("superseded"):
            status.append(" superseded", style="dim")
            status.append(f" ({shown(r['superseded'])})", style="dim")
        table.add_row(
            _name(r["run_id"]),
            _name(r["system"] or "-"),
            _name(r["framework"] or "-"),
            str(r["world_size"] or "-"),
            Text(accel),
            str(r["global_batch_size"] or "-"),
            status,
            _time_cell(r["time_to_train_s"], rejected.get(r["run_id"])),
            acc,
            *([_layout_cell(r.get("parallel"))] if layout else []),
            *([_name(r["slurm_job_id"] or "-")] if slurm else []),
        )
    return table


def _layout_cell(parallel: str | None) -> str:
    """``dp2,tp2`` from the degrees' JSON; ``-`` where the run recorded none (data parallel over its ranks)."""
    from honestscale.judged import layout_text

    try:
        got = json.loads(parallel) if parallel else None
    except ValueError:
        got = None
    return layout_text(got) if isinstance(got, dict) else "-"


def plan_table(campaign: str, plans: list[Any]) -> Table:
    """The runs a spec plans (campaign run --dry-run)."""
    table = Table(title=Text(f"{shown(campaign)}: {len(plans)} runs planned"), title_justify="left")
    for col in ("run", "purpose", "framework", "workers", "seed", "options"):
        table.add_column(col, overflow="fold")
    for p in plans:
        options = " ".join(f"{k}={v}" for k, v in p.args.items())
        table.add_row(
            _name(p.run_id), p.purpose, _name(p.framework), str(p.workers), str(p.seed), _name(options)
        )
    return table


def quarantine_records(df: pl.DataFrame) -> list[dict[str, object]]:
    return [
        {
            "file": r["file"],
            "line": r["line"],
            "reason": r["reason"],
            "raw": r["raw"],
            "raw_length": r["raw_length"],
        }
        for r in df.iter_rows(named=True)
    ]


def quarantine_table(df: pl.DataFrame) -> Table:
    table = Table(title=f"{df.height} quarantined lines", title_justify="left")
    for col in ("file", "line", "reason", "raw"):
        table.add_column(col, overflow="fold")
    for r in df.iter_rows(named=True):
        raw = r["raw"] if len(r["raw"]) <= 80 else r["raw"][:77] + "..."
        table.add_row(_name(r["file"]), str(r["line"]), _name(r["reason"]), _name(raw))
    return table


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def dumps(obj: Any) -> str:
    """Machine-readable JSON for stdout; invisible characters of names as JSON escapes (``\\u202e``: the same
    string to a program, visible in a terminal)."""
    return json_text(json.dumps(obj, indent=2, default=str, ensure_ascii=False))

"""torchtitan's per-rank structured system logs, both layouts: each step's spans (its data, forward-backward and
optimizer times) and, in layout 2, the rank's tokens.

Layout 1 (the observability stack pytorch/torchtitan#2601-#2607: ``system_logs/<source>_rank_<r>_system.jsonl``,
each line ``{"int": {...}, "normal": {...}, "double": {...}, "normvector": {...}}``) and layout 2 (main since May
2026 and 0.3: ``structured_logs/<source>.global_rank_<r>.<time>-<id>.jsonl``, flat) both write ``<name>_start`` /
``<name>_end`` records, the end's ``value`` the span in ms: ``step``, ``fetching_batch``, ``fwd_bwd``, ``optim``;
layout 2 also the rank's ``local_valid_tokens``. A layout-1 system log beside an experiment log holds the same
spans: it is read with it, not as a second run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import RankEvents, checked, count, number, run_id
from honestscale.collector.importers.torchtitan._shared import (
    dump_folder,
    head_lines,
    jsonl,
    start_run,
    stop_if_torn_down,
)

SYSTEM = "torchtitan-system"
SYSTEM_LABEL = "torchtitan structured system log (per rank)"

_LAYOUT_1 = ("int", "normal", "double")


@dataclass(frozen=True)
class SystemRecord:
    """One line of a system log of either layout, as written (a step or a time that is no number is None, what
    it was written as kept beside it: quarantined by field, never dropped)."""

    rank: int | None
    step: int | None
    name: Any  # log_type_name: step_start, step_end, fwd_bwd_end, metric_value ...
    event: Any  # event_name: local_valid_tokens ...
    value: Any  # an end's span in ms, a metric's value
    t: float | None  # seconds (time_us / 1e6)
    host: Any
    source: Any
    raw_step: Any
    raw_time: Any

    def raw(self) -> str:
        """The record as the quarantine shows it."""
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, default=str)


@dataclass
class Spans:
    """What a system log's records say step by step: each step's spans in seconds (and the rank's tokens), the
    line and time of each step's end, and whether the process group was torn down (the run's end)."""

    by_step: defaultdict[int, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    ends: dict[int, tuple[int, float]] = field(default_factory=dict)
    torn_down: bool = False


def _flat(d: dict[str, Any]) -> dict[str, Any] | None:
    """A line of either layout as layout 2's flat record; None for a line of neither."""
    if not (set(_LAYOUT_1) <= set(d) and all(isinstance(d[k], dict) for k in _LAYOUT_1)):
        return d if "log_type_name" in d and "time_us" in d else None
    i, n, x = d["int"], d["normal"], d["double"]
    return {
        "rank": i.get("rank"),
        "step": i.get("step"),
        "time_us": i.get("time_us"),
        "log_type_name": n.get("log_type_name"),
        "event_name": n.get("event_name"),
        "value": x.get("value"),
        "host_name": n.get("host_name"),
        "logger_name": n.get("logger_name"),
        "source": n.get("source"),
    }


def system_record(d: dict[str, Any]) -> SystemRecord | None:
    """One system-log line of either layout; None for a line that is no torchtitan logger's record."""
    flat = _flat(d)
    if flat is None or not str(flat.get("logger_name") or "").startswith("torchtitan"):
        return None
    t = number(flat.get("time_us"))
    return SystemRecord(
        rank=count(flat.get("rank")),
        step=count(flat.get("step")),
        name=flat.get("log_type_name"),
        event=flat.get("event_name"),
        value=flat.get("value"),
        t=t / 1e6 if t is not None else None,
        host=flat.get("host_name"),
        source=flat.get("source"),
        raw_step=flat.get("step"),
        raw_time=flat.get("time_us"),
    )


def sniff_system(path: Path, head: bytes) -> bool:
    lines = head_lines(head)
    return bool(lines) and all(system_record(d) is not None for d in lines)


def parse_system(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    records = [(n, rec) for n, d in jsonl(text, out) if (rec := system_record(d)) is not None]
    if not records:
        out.warnings.append("no torchtitan system record: no run")
        return out
    ranks = {rec.rank for _, rec in records if rec.rank is not None}
    if _read_with_experiment(path, ranks, out):
        return out
    if len(ranks) != 1:
        out.warnings.append(f"{len(ranks)} ranks in one system log (torchtitan writes one per rank): no run")
        return out
    spans = Spans()
    for n, rec in records:
        _span(n, rec, spans, out)
    times = [rec.t for _, rec in records if rec.t is not None]
    if not times:
        out.warnings.append("no record with a time (time_us): no run")
        return out
    out.events = _events(path, records, next(iter(ranks)), spans, min(times), campaign)
    return out


def _read_with_experiment(path: Path, ranks: set[int], out: Parsed) -> bool:
    """A layout-1 system log of one rank beside its experiment log holds the same spans: it is read with it (no
    run of its own)."""
    if path.parent.name != "system_logs" or len(ranks) != 1:
        return False
    twin = dump_folder(path) / "experiment_logs" / path.name.replace("_system.jsonl", "_experiment.jsonl")
    if not twin.is_file():
        return False
    out.read_with = twin
    out.notes.append(f"its spans are the experiment log's ({twin.name}): read with it, not a second run")
    return True


def _left_out(n: int, name: str, rec: SystemRecord, out: Parsed) -> bool:
    """A record of no step, or a step's end of no time: left out, quarantined by field when it wrote one that is
    no number."""
    if rec.step is None:
        if rec.raw_step is not None:
            why = f"field 'step': {rec.raw_step!r} is no step number: the record is left out"
            out.bad.append(BadLine(n, rec.raw(), why))
        return True
    if name == "step_end" and rec.t is None:
        why = f"field 'time_us': {rec.raw_time!r} is no time: the step it ends is left out"
        out.bad.append(BadLine(n, rec.raw(), why))
        return True
    return False


def _span(n: int, rec: SystemRecord, spans: Spans, out: Parsed) -> None:
    """One record's span (an ``_end``'s, in seconds) or tokens (``local_valid_tokens``) at its step."""
    name = str(rec.name or "")
    if name.startswith("torch_distributed_teardown_end"):
        spans.torn_down = True
    if _left_out(n, name, rec, out) or rec.step is None:
        return
    timed = name.endswith("_end")
    if not (timed or (name == "metric_value" and rec.event == "local_valid_tokens")):
        return
    # a span in ms or a count: never negative, NaN or a word (quarantined by field, never dropped in silence)
    value = checked(out, n, rec.raw(), "value", rec.value, least=0.0, what=name)
    if value is None:
        return
    if not timed:
        spans.by_step[rec.step]["tokens"] = value
        return
    spans.by_step[rec.step][name.removesuffix("_end")] = value / 1000.0
    if name == "step_end" and rec.t is not None:
        spans.ends[rec.step] = (n, rec.t)


def _events(
    path: Path,
    records: list[tuple[int, SystemRecord]],
    r: int,
    spans: Spans,
    t0: float,
    campaign: str | None,
) -> list[tuple[int, dict[str, Any]]]:
    """The run of one rank's system log: its start (its first record's time), a step per step end, and its stop
    when the process group was torn down."""
    layout1 = path.parent.name == "system_logs"
    rank = RankEvents(run_id("torchtitan", str(dump_folder(path).resolve())), r)
    kind = "system log, layout 1" if layout1 else "structured log, layout 2"
    per_step = "samples and tokens per step" if layout1 else "samples per step (tokens only)"
    unknown = [per_step, "model shape and parameters", "accelerator"]
    start_run(rank, records[0][0], t0, path, r, campaign, kind, records[0][1].host, unknown)
    first = min(spans.ends, default=None)  # once: inside the loop it made the reading quadratic in the steps
    for step in sorted(spans.ends):
        s = spans.by_step[step]
        line, t = spans.ends[step]
        rank.add(
            line,
            "step",
            t,
            step=step - 1,
            t_total=s["step"],
            tokens=count(s.get("tokens")),
            t_data=s.get("fetching_batch"),
            t_compute=s.get("fwd_bwd"),
            t_optimizer=s.get("optim"),
            comm_measured=False,
            warmup=step == first,
        )
    stop_if_torn_down(rank, spans.torn_down, records[-1][0], records[-1][1].t or t0)
    return rank.numbered()

"""torchtitan's per-rank experiment metrics (``experiment_logs/<source>_rank_<r>_experiment.jsonl``, the
observability stack pytorch/torchtitan#2601-#2607): one step event per step and rank from ``trainer_time/*_s``.

Each line is ``{"key", "reduce", "sum"+"weight" | "value", "step", "rank", "source", "caller", "timestamp"}``; a
mean is written as its sum and weight. The file is one rank's; the world size, the samples and tokens per step
(``n_tokens_sum`` is the whole run's), the model and the accelerator are unknown here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from honestscale.collector._parsed import BadLine, Parsed
from honestscale.collector.importers._build import RankEvents, checked, count, number, run_id
from honestscale.collector.importers.torchtitan._shared import (
    claims,
    dump_folder,
    head_lines,
    jsonl,
    start_run,
    stop_if_torn_down,
)

EXPERIMENT = "torchtitan-experiment"
EXPERIMENT_LABEL = "torchtitan experiment metrics (per rank)"

_UNKNOWN = [
    "samples and tokens per step (n_tokens_sum is the whole run's)",
    "model shape and parameters",
    "accelerator",
]


@dataclass
class Metrics:
    """What one experiment log says: each step's metrics (a mean as its sum over its weight), the line of each
    step's last record, each step's latest time, and the ranks its records name."""

    ranks: set[int]
    by_step: defaultdict[int, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    last_line: dict[int, int] = field(default_factory=dict)
    times: dict[int, float] = field(default_factory=dict)

    def series(self, key: str) -> list[float | None]:
        """One metric over the steps that have any (None where a step has not this one)."""
        return [m.get(key) for m in self.by_step.values()]


def sniff_experiment(path: Path, head: bytes) -> bool:
    lines = head_lines(head)
    return bool(lines) and all({"key", "reduce", "rank", "step"} <= set(d) for d in lines)


def parse_experiment(path: Path, text: str, campaign: str | None) -> Parsed:
    out = Parsed()
    rows = jsonl(text, out)
    metrics = Metrics(ranks={r for _, d in rows if (r := count(d.get("rank"))) is not None})
    for n, d in rows:
        _record(n, d, metrics, out)
    if len(metrics.ranks) != 1 or not metrics.by_step:
        out.warnings.append(_no_run(metrics))
        return out
    out.events = _events(path, metrics, campaign)
    return out


def _no_run(metrics: Metrics) -> str:
    if not metrics.by_step:
        return "no metric with a step: no run"
    return f"{len(metrics.ranks)} ranks in one experiment log (torchtitan writes one per rank): no run"


def _record(n: int, d: dict[str, object], metrics: Metrics, out: Parsed) -> None:
    """One line's metric, at its step; a metric of a step that is no number is quarantined, a line of no metric
    counted as another line."""
    step, key = count(d.get("step")), d.get("key")
    if step is None and isinstance(key, str) and d.get("step") is not None:  # a metric of no step: said
        why = f"field 'step': {d.get('step')!r} is no step number: the record is left out"
        out.bad.append(BadLine(n, json.dumps(d, default=str), why))
        return
    if step is None or not isinstance(key, str):
        out.other_lines += 1
        return
    value = _value(n, d, key, out)
    if value is not None:
        metrics.by_step[step][key] = value
    metrics.last_line[step] = n
    t = number(d.get("timestamp"))
    if t is not None:
        metrics.times[step] = max(metrics.times.get(step, t), t)


def _value(n: int, d: dict[str, object], key: str, out: Parsed) -> float | None:
    """A record's value (a mean: its sum over its weight); one that cannot be is quarantined by field."""
    raw = json.dumps(d, default=str)
    least = (
        0.0 if key.startswith("trainer_time/") else None
    )  # seconds: never negative (the contract refuses it)
    if "sum" not in d:
        return checked(out, n, raw, "value", d.get("value"), least=least, what=key)
    s = checked(out, n, raw, "sum", d.get("sum"), least=least, what=key)
    w = checked(out, n, raw, "weight", d.get("weight"), above=0.0, what="weight of a mean")
    return s / w if s is not None and w else None


def _events(path: Path, metrics: Metrics, campaign: str | None) -> list[tuple[int, dict[str, object]]]:
    """The run of one rank's metrics: its start (the first step's time less its span), a step per step that has
    a step time, and its stop when the process group was torn down."""
    r = next(iter(metrics.ranks))
    rank = RankEvents(run_id("torchtitan", str(dump_folder(path).resolve())), r)
    by_step = metrics.by_step
    first = min(by_step)
    t0 = metrics.times.get(first, 0.0) - by_step[first].get("trainer_time/step_s", 0.0)
    said = claims(
        metrics.series("trainer_throughput/tps_mean"),
        metrics.series("trainer_throughput/tflops_mean"),
        metrics.series("trainer_throughput/mfu_pct_mean"),
        None,
    )
    start_run(
        rank,
        min(metrics.last_line.values()),
        t0,
        path,
        r,
        campaign,
        "experiment metrics",
        None,
        _UNKNOWN,
        said,
    )
    for step in sorted(by_step):
        m = by_step[step]
        total = m.get("trainer_time/step_s")
        if total is None:
            continue
        rank.add(
            metrics.last_line[step],
            "step",
            metrics.times.get(step, t0),
            step=step - 1,
            t_total=total,
            t_data=m.get("trainer_time/data_loading_s"),
            t_compute=m.get("trainer_time/forward_backward_s"),
            t_optimizer=m.get("trainer_time/optimizer_s"),
            comm_measured=False,
            warmup=step == first,
            train_loss=m.get("training/loss_mean"),
        )
    torn_down = "trainer_time/teardown_s" in by_step[max(by_step)]
    stop_if_torn_down(
        rank, torn_down, max(metrics.last_line.values()), max(metrics.times.values(), default=t0)
    )
    return rank.numbered()

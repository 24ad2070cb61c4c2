"""The kind of scaling a series is (strong, weak, time to solution, mixed), from its batches and its target, and
where one submitter's points fall into separate series because a label differs: once, for every judge."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from honestscale.view._runs import Run

KINDS = ("strong", "weak", "time_to_solution", "mixed")  # the kinds of scaling a series is classified as
POOLED = "(pooled)"  # the campaign of a comparison across campaigns (View.pooling)


@dataclass(frozen=True)
class Mode:
    """How a scaling series scales, from its batches and its stop criterion: the one classification."""

    name: str  # strong | weak | time_to_solution | mixed (KINDS)
    batches: str  # what the batches alone say: strong | weak | irregular
    fixed_target: bool  # every successful run trains to a target accuracy
    sentence: str  # what it means for the numbers, for the report and the dashboard
    target: str | None = None  # the one quality target every successful run trained to, where they share one


def batch_mode(runs: Iterable[Run]) -> str:
    """``strong`` if every point has the same global batch, ``weak`` if the same batch per data-parallel replica,
    else ``irregular``.

    The batch is counted in tokens where every run records them (``global_batch_tokens``), else in samples. A replica
    is a worker of plain data parallelism; under a layout (contract 3) the workers of a tensor, pipeline or context
    parallel group train one replica together, so weak scaling keeps the tokens per replica (dp x fsdp), not per
    worker, constant."""
    runs = [r for r in runs if r.workers and r.global_batch_size]
    tokens = bool(runs) and all(r.global_batch_tokens for r in runs)
    points: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for r in runs:
        assert r.workers and r.global_batch_size
        batch = int(r.global_batch_tokens or 0) if tokens else int(r.global_batch_size)
        replicas = r.degrees["dp"] * r.degrees["fsdp"] if r.parallel else r.workers
        points[r.workers].add((batch, replicas))
    if len(points) < 2 or any(len(b) != 1 for b in points.values()):
        return "irregular"
    batches = {w: next(iter(b)) for w, b in points.items()}
    if len({b for b, _ in batches.values()}) == 1:
        return "strong"
    per_replica = {b / n for b, n in batches.values()}
    return "weak" if len(per_replica) == 1 else "irregular"


def kind_words(kind: str | None) -> str:
    """A series' kind as a reader reads it: ``time to solution``, ``strong``; ``unclassified`` for none."""
    return kind.replace("_", " ") if kind else "unclassified"


def shared_target(runs: Iterable[Run]) -> str | None:
    """The one quality target every successful run trained to (``eval_accuracy >= 0.759``), or None where a
    successful run stopped otherwise or the runs' targets (metric and value) differ."""
    ok = [r for r in runs if r.ok]
    if not ok or any(r.stop_criterion != "target_accuracy" or r.stop_value is None for r in ok):
        return None
    targets = {(r.target_metric, float(r.stop_value or 0.0)) for r in ok}
    if len(targets) != 1:
        return None
    ((metric, value),) = targets
    return f"{metric or 'the quality'} {value:g}"


SENTENCES = {
    "strong": "Strong scaling: the same global batch at every scale, a fixed problem; speedup and efficiency on "
    "time and on throughput.",
    "weak": "Weak scaling: the batch per worker is constant, so each scale solves a larger problem; throughput per "
    "worker and its efficiency are the measure, not a speedup of time to train.",
    "time_to_solution": "Time to solution: every run trains to one quality target ({target}) with a global batch "
    "chosen per scale, as MLPerf does; the speedup and efficiency of the time to train are the measure, not "
    "ratios of throughput or step time across different batches.",
    "mixed": "Mixed: the batches are neither strong nor weak scaling and the runs share no quality target (HS111); "
    "speedups of time and throughput per worker are both given, and neither is a clean scaling measure.",
}


def classify(runs: list[Run]) -> Mode:
    """The series' kind: ``strong`` (one global batch), ``weak`` (one batch per replica, a fixed amount of work),
    ``time_to_solution`` (one quality target for every successful run, the batch changing with scale) or
    ``mixed`` (none of these), with the sentence every output prints."""
    batches = batch_mode(runs)
    ok = [r for r in runs if r.ok]
    fixed = bool(ok) and all(r.stop_criterion == "target_accuracy" for r in ok)
    target = shared_target(runs)
    if batches == "strong":
        return Mode("strong", batches, fixed, SENTENCES["strong"], target)
    if target is not None:
        return Mode(
            "time_to_solution", batches, fixed, SENTENCES["time_to_solution"].format(target=target), target
        )
    if batches == "weak":  # targets that differ between runs are HS110's (one stop criterion)
        return Mode("weak", batches, fixed, SENTENCES["weak"])
    return Mode("mixed", batches, fixed, SENTENCES["mixed"])


SPLIT_BY = "framework"  # the label a series is keyed by that one submitter's points may carry differently


def _submitter(run: Run) -> str | None:
    """Who ran it, where a source says: an MLPerf result's organisation (one campaign of a user is one submitter)."""
    org = (run.mlperf or {}).get("org")
    return org if isinstance(org, str) and org else None


def label_splits(runs: Iterable[Run], pooled: bool = False) -> dict[tuple[Any, ...], str]:
    """Where points of one submitter, model, dataset, layout and accelerator fall into separate series only because
    their framework label differs (NVIDIA's GPT-3 at 512 GPUs as "PyTorch NVIDIA Release 23.09", from 768 as "NVIDIA
    NeMo ..."): for each series key (``comparisons``' scaling key) the sentence that says which label split them
    and where. Labels run side by side at shared worker counts (a campaign comparing frameworks) split nothing: a
    split is two labels with no worker count in common."""
    families: dict[tuple[Any, ...], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    keys: dict[tuple[Any, ...], set[tuple[Any, ...]]] = defaultdict(set)
    for r in runs:
        if not r.workers:
            continue
        campaign = POOLED if pooled else r.campaign
        family = (campaign, r.model, r.dataset, r.layout_family, _submitter(r), r.hardware)
        families[family][r.framework or "?"].add(r.workers)
        keys[family].add((campaign, r.model, r.dataset, r.framework, r.layout_family))
    out: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for family, labels in families.items():
        named = sorted(labels.items(), key=lambda kv: (min(kv[1]), kv[0]))
        if len(named) < 2 or not any(
            not (a & b) for i, (_, a) in enumerate(named) for _, b in named[i + 1 :]
        ):
            continue
        who = f"{family[4]}'s " if family[4] else ""
        where = "; ".join(f"{label!r} at {', '.join(map(str, sorted(ws)))}" for label, ws in named)
        sentence = (
            f"split by its {SPLIT_BY} label: {who}{family[1]} points carry {len(named)} labels ({where} workers), "
            "each label its own series"
        )
        for key in keys[family]:
            out[key].append(sentence)
    return {k: "; ".join(v) for k, v in out.items()}

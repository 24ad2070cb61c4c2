"""Like with like: the pairs of setups a comparison of A and B is made of, what differs, the factor and the confounds.

A *setup* is the runs of one side that share the pairing key: model, dataset, global batch, precision and worker
count (``PAIRED``), less whatever the comparison studies (``workers=8`` against ``workers=16`` pairs the rest). A
setup of A and one of B with the same key make a *pair*; setups of one side that the other lacks are listed, with
what differs from the closest setup of the other side, never dropped.

What differs between the two sides of a pair (``SETUP``: framework and version, hardware, nodes, system, software
versions, optimizer, schedule, compression, stop target, every hyper-parameter the runner recorded ...) is the
*factor* under study when the selectors name it (or ``--factor`` does, or it is the only difference); anything else
that differs is a *confound* (HS214). Against MLPerf submissions (the state of the art) every setup of A is paired
with every submission of B of the same benchmark (of any, when none matches), and everything that differs is
listed (HS112 judges the target and the dataset).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from honestscale.analysis.mlperf import submission_of
from honestscale.compare._select import COLUMNS, IDENTITY, Selector, value_of
from honestscale.view import PROBLEM, Run

PAIRED = ("model", "dataset", "global_batch_size", "precision", "workers", "layout_key")
_NOT_SETUP = {*IDENTITY, "accelerator", "software", "world_size", "n_accelerators", "data_path", "parallel",
              "replica_ranks", "pipeline_schedule", "microbatches"}  # fmt: skip
# hyper-parameters the runs table already holds as a column (their difference is reported once, by the column)
_MIRRORED = {"batch_size", "lr", "model", "dataset", "precision", "optimizer", "lr_schedule", "grad_compression",
             "target_accuracy", "seed", "data_path", "scaling", "parallel", "pipeline_schedule", "microbatches"}  # fmt: skip
NAMES = {"global_batch_size": "global batch", "layout_key": "layout", "hardware": "accelerator", "n_nodes": "nodes",
         "accelerators_per_node": "accelerators per node", "stop_value": "stop target",
         "target_metric": "target metric", "stop_criterion": "stop criterion"}  # fmt: skip


def name(field_name: str) -> str:
    return NAMES.get(field_name, field_name.replace("hyperparameters.", "").replace("_", " "))


def setup_fields(runs: Sequence[Run]) -> list[str]:
    """Every field a setup is defined by, for these runs: columns, hardware, software versions, hyper-parameters."""
    out = [c for c in COLUMNS if c not in _NOT_SETUP] + ["hardware", "workers", "layout_key"]
    software = sorted({k for r in runs for k in r.software_stack})
    out += [f"software.{k}" for k in software]
    if any(r.source == "mlperf" for r in runs):
        # an MLPerf log's hyper-parameters are its own keys (and its evaluations): the columns and the round say it
        return [*out, "mlperf.division", "mlperf.round"]
    hyper = sorted({k for r in runs for k in r.hyperparameters} - _MIRRORED)
    return out + [f"hyperparameters.{k}" for k in hyper]


def _shown(v: Any) -> str:
    return "unset" if v is None else str(v)


@dataclass(frozen=True)
class Difference:
    """One field whose values differ between the sides: every value of each side."""

    field: str
    a: tuple[str, ...]
    b: tuple[str, ...]

    @property
    def name(self) -> str:
        return name(self.field)

    def text(self) -> str:
        return f"{self.name} {', '.join(self.a)} → {', '.join(self.b)}"

    def as_json(self) -> dict[str, object]:
        return {"field": self.field, "name": self.name, "a": list(self.a), "b": list(self.b)}


def differences(a: Sequence[Run], b: Sequence[Run], fields: Sequence[str]) -> list[Difference]:
    out = []
    for f in fields:
        va = sorted({_shown(value_of(r, f)) for r in a})
        vb = sorted({_shown(value_of(r, f)) for r in b})
        if va != vb:
            out.append(Difference(f, tuple(va), tuple(vb)))
    return out


@dataclass(frozen=True)
class Consequence:
    """A difference that follows from the factor under study, with why (not a confound: HS214 names it so)."""

    difference: Difference
    why: str

    def text(self) -> str:
        return f"{self.difference.text()} ({self.why})"

    def as_json(self) -> dict[str, object]:
        return {**self.difference.as_json(), "why": self.why}


# fields whose value is a worker's share of a fixed total: under a changed worker count, a share that keeps the
# total (share x workers) the same on every run of both sides follows from the worker count
_SHARES = {"local_batch_size": "strong scaling: the global batch {total} is split between the workers"}
_WORKER_COUNT = {"workers", "world_size", "n_accelerators"}


def _consequence(d: Difference, a: Sequence[Run], b: Sequence[Run]) -> str | None:
    """Why difference ``d`` follows from a change of the worker count between ``a`` and ``b``, or None."""
    runs = [*a, *b]
    if any(not r.workers for r in runs):
        return None
    threads = "threads" in d.field
    share = _SHARES.get(d.field) or (
        "the launcher splits {total} threads of a node between the workers on it" if threads else None
    )
    if share is not None:
        total = _shared_total([value_of(r, d.field) for r in runs], runs, per_node=threads)
        return None if total is None else share.format(total=total)
    values = [_mapping(value_of(r, d.field)) for r in runs]
    if all(
        isinstance(v, dict) for v in values
    ):  # the launcher's environment: only its thread knobs may differ
        return _thread_knobs(values, runs)
    if d.field == "backend":
        return _backend(runs)
    if d.field == "n_nodes":
        return _nodes(runs)
    return None


def _thread_knobs(values: list[dict[str, object]], runs: Sequence[Run]) -> str | None:
    """The launcher's environments differ in thread knobs alone, each splitting one total between the workers."""
    keys = {k for v in values for k in v if len({_shown(x.get(k)) for x in values}) > 1}
    if not keys or not all("THREADS" in k.upper() for k in keys):
        return None
    totals = {k: _shared_total([_float(v.get(k)) for v in values], runs, per_node=True) for k in keys}
    if any(t is None for t in totals.values()):
        return None
    knobs = ", ".join(f"{k} splits {t}" for k, t in sorted(totals.items()))
    return f"the launcher's thread settings split a node's threads between its workers ({knobs})"


def _backend(runs: Sequence[Run]) -> str | None:
    single = {_shown(value_of(r, "backend")) for r in runs if r.workers == 1}
    several = {_shown(value_of(r, "backend")) for r in runs if (r.workers or 0) > 1}
    if single <= {"unset", "none"} and several and not several & {"unset", "none"}:
        return "one worker needs no collective backend"
    return None


def _nodes(runs: Sequence[Run]) -> str | None:
    per = {r.accelerators_per_node for r in runs}
    if len(per) == 1 and (p := per.pop()) and all(r.n_nodes == -(-(r.workers or 0) // p) for r in runs):
        return f"{p} workers per node: the nodes follow from the worker count"
    return None


def _mapping(v: Any) -> Any:
    """A JSON object recorded as text (a column of the runs table) as the dict it is; anything else as it is."""
    if isinstance(v, str) and v.startswith("{"):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _shared_total(values: Sequence[Any], runs: Sequence[Run], per_node: bool) -> str | None:
    """The total every run's share adds up to (share x its workers, or x its workers per node), when it is the same
    on every run; else None."""
    totals = set()
    for r, v in zip(runs, values, strict=True):
        if not isinstance(v, int | float) or isinstance(v, bool) or not r.workers:
            return None
        totals.add(round(float(v) * (r.workers / (r.n_nodes or 1) if per_node else r.workers), 9))
    return _number(totals.pop()) if len(totals) == 1 else None


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


@dataclass
class Setup:
    """The runs of one side that share the pairing key (or one MLPerf submission)."""

    key: dict[str, object]
    runs: list[Run]
    submission: str | None = None  # mlperf:<round>/<org>/<system>/<benchmark>

    @property
    def label(self) -> str:
        text = " ".join(f"{name(k)}={v}" for k, v in self.key.items() if v is not None)
        return f"{self.submission} ({text})" if self.submission else text


@dataclass
class Pair:
    a: Setup
    b: Setup
    differs: list[Difference]
    factor: list[Difference]
    confounds: list[Difference]
    state_of_the_art: bool = False  # B (or A) is MLPerf submissions
    consequences: list[Consequence] = field(default_factory=list)  # differences that follow from the factor

    @property
    def label(self) -> str:
        return self.a.label if self.a.key == self.b.key else f"{self.a.label} | {self.b.label}"

    @property
    def runs(self) -> list[Run]:
        return [*self.a.runs, *self.b.runs]

    @property
    def problem_differs(self) -> list[Difference]:
        return [d for d in self.differs if d.field in PROBLEM]


@dataclass
class Unpaired:
    side: str  # A | B
    setup: Setup
    closest: str | None  # the label of the closest setup of the other side
    differs: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {"side": self.side, "setup": self.setup.label, "runs": sorted(r.id for r in self.setup.runs),
                "closest": self.closest, "differs": self.differs}  # fmt: skip


def is_mlperf(runs: Sequence[Run]) -> bool:
    return bool(runs) and all(r.source == "mlperf" for r in runs)


def _setups(runs: Sequence[Run], key_fields: Sequence[str], by_submission: bool) -> list[Setup]:
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    for r in runs:
        sub = (submission_of(r),) if by_submission else ()
        groups[(*sub, *(_shown(value_of(r, k)) for k in key_fields))].append(r)
    out = []
    for k, group in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        values = k[1:] if by_submission else k
        out.append(Setup(dict(zip(key_fields, values, strict=True)), group, k[0] if by_submission else None))
    return out


def _benchmark(setup: Setup) -> str:
    r = setup.runs[0]
    return str((r.mlperf or {}).get("benchmark") or r.model or "")


def studied(a: Selector, b: Selector, named: Sequence[str]) -> set[str]:
    """The fields under study: what ``--factor`` names, else those the two selectors set to different values."""
    got = set(named) or {k for k in (*a.names, *b.names) if a.get(k) != b.get(k)}
    return (
        got | {"layout_key"} if "layout" in got else got
    )  # a layout by name studies the layout the pairs key


def split_factor(
    differs: list[Difference], a: Selector, b: Selector, named: Sequence[str],
    runs: tuple[Sequence[Run], Sequence[Run]] = ((), ()),
) -> tuple[list[Difference], list[Consequence], list[Difference]]:  # fmt: skip
    """(factor, consequences, confounds): the factor is what ``--factor`` names, else the fields the selectors set
    to different values, else the one difference there is; a difference that follows from a factor that changes
    the worker count (the per-worker batch under strong scaling, the threads each worker gets of a node, the
    collective backend that one worker does without, the nodes the workers fill) is a consequence; every other
    difference is a confound. With several differences and none named, each is a confound of the others."""
    # a run's identity (run_id=, a campaign) is no setup to study, nor a field the selectors set that the runs of
    # both sides share (``workers=1`` on one side, every run at 1 worker on both)
    chosen = {k for k in studied(a, b, named) - set(IDENTITY) if named or any(d.field == k for d in differs)}
    if not chosen and len(differs) == 1:
        return differs, [], []
    factor = [d for d in differs if d.field in chosen]
    rest = [d for d in differs if d.field not in chosen]
    follows: list[Consequence] = []
    if chosen & _WORKER_COUNT and all(runs):
        for d in rest:
            why = _consequence(d, *runs)
            if why is not None:
                follows.append(Consequence(d, why))
    if chosen & {"layout", "layout_key"} and all(runs):
        for d in rest:
            why = _layout_consequence(d, *runs)
            if why is not None:
                follows.append(Consequence(d, why))
    kept = {c.difference.field for c in follows}
    return factor, follows, [d for d in rest if d.field not in kept]


def _layout_consequence(d: Difference, a: Sequence[Run], b: Sequence[Run]) -> str | None:
    """Why difference ``d`` follows from a change of the parallel layout, or None: the batch per rank is the global
    batch over the layout's data-parallel replicas (dp x fsdp) on every run of both sides."""
    runs = [*a, *b]
    if d.field == "local_batch_size" and all(
        r.global_batch_size and r.local_batch_size
        and r.local_batch_size * r.degrees["dp"] * r.degrees["fsdp"] == r.global_batch_size
        for r in runs
    ):  # fmt: skip
        return "the layout's data-parallel replicas (dp x fsdp) split the global batch"
    return None


def pair(a_runs: Sequence[Run], b_runs: Sequence[Run], a: Selector, b: Selector,
         named: Sequence[str] = ()) -> tuple[list[Pair], list[Unpaired]]:  # fmt: skip
    """The pairs of setups of A and B, and the setups that have no partner (with what differs from the closest)."""
    fields = setup_fields([*a_runs, *b_runs])
    sota = is_mlperf(b_runs) != is_mlperf(a_runs)
    key = [k for k in PAIRED if k not in studied(a, b, named)]
    if sota:
        return _state_of_the_art(a_runs, b_runs, fields)
    sa, sb = _setups(a_runs, key, False), _setups(b_runs, key, False)
    pairs: list[Pair] = []
    for x in sa:
        for y in sb:
            if x.key == y.key:
                d = differences(x.runs, y.runs, fields)
                factor, follows, confounds = split_factor(d, a, b, named, (x.runs, y.runs))
                pairs.append(Pair(x, y, d, factor, confounds, consequences=follows))
    paired_a = {id(p.a) for p in pairs}
    paired_b = {id(p.b) for p in pairs}
    unpaired = [_unpaired("A", s, sb) for s in sa if id(s) not in paired_a]
    unpaired += [_unpaired("B", s, sa) for s in sb if id(s) not in paired_b]
    return pairs, unpaired


def _unpaired(side: str, s: Setup, others: Sequence[Setup]) -> Unpaired:
    if not others:
        return Unpaired(side, s, None, ["the other side has no run"])

    def gap(o: Setup) -> list[str]:
        return [f"{name(k)} {v} (other side: {o.key.get(k)})" for k, v in s.key.items() if o.key.get(k) != v]

    closest = min(others, key=lambda o: (len(gap(o)), o.label))
    return Unpaired(side, s, closest.label, gap(closest))


def _state_of_the_art(
    a_runs: Sequence[Run], b_runs: Sequence[Run], fields: list[str]
) -> tuple[list[Pair], list[Unpaired]]:
    """Every setup of the native side against every submission of the MLPerf side of the same benchmark (of any,
    when none is of the same benchmark: then the model is among what differs)."""
    sa = _setups(a_runs, PAIRED, is_mlperf(a_runs))
    sb = _setups(b_runs, PAIRED, is_mlperf(b_runs))
    pairs = []
    for x in sa:
        same_benchmark = [y for y in sb if _benchmark(y) == _benchmark(x)]
        for y in same_benchmark or sb:
            # the factor is "against the state of the art": every difference is listed, HS112 and HS104 judge them
            pairs.append(Pair(x, y, differences(x.runs, y.runs, fields), [], [], state_of_the_art=True))
    return pairs, []

"""The comparisons a reader would make, and how each scaling series is classified: once, for every judge.

A *comparison* is a group of final runs:

* ``config``: repetitions of one configuration point (same campaign, model, dataset, framework,
  accelerators, workers and global batch);
* ``scaling``: one model, dataset and framework across two or more worker counts, classified by ``classify``:
  ``strong`` (the global batch constant: a fixed problem), ``weak`` (the batch per worker constant, each run
  training a fixed amount of work: the problem grows with the workers), ``time_to_solution`` (every successful
  run trains to one quality target, metric and value, with a batch chosen per scale, as MLPerf submissions do)
  or ``mixed`` (batches that follow neither and no shared target);
* ``framework``: one model and dataset at one worker count across frameworks, compared only like for like
  (``LIKE``: same model, dataset, global batch, precision, accelerator model and nodes); the runs of any other
  setup are kept beside it with what differs (``left_out``);
* ``hardware``: one model, dataset and framework across accelerator models (normalised: two spellings of one
  chip are one accelerator);
* ``campaign``: every run of a campaign, tuning and failed ones included;
* ``pair``: made by ``honestscale compare`` (not here): a setup of A against its like of B, with what differs in
  its key (``factor``, ``confounds``, ``differs``, ``state_of_the_art``).

Comparisons are made within a campaign; a view that pools campaigns (``View.pooling``, asked for with ``--pool``)
makes the others across them, their ``campaign`` key ``POOLED``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypedDict

from honestscale.view._frameworks import framework_family
from honestscale.view._kinds import (
    POOLED,
    Mode,
    classify,
    label_splits,
)
from honestscale.view._runs import Run

COMPARED = ("final", "baseline")  # tuning and smoke runs are context, not results

# Like for like: frameworks are compared only on runs of the same model, dataset, global batch, precision,
# accelerator model and nodes.
LIKE = ("model", "dataset", "global_batch_size", "precision", "hardware", "n_nodes", "accelerators_per_node")
# What defines the problem a run solves: runs that differ in these solve different problems (HS112).
PROBLEM = ("model", "dataset", "stop_criterion", "stop_value", "target_metric")
LIKE_NAMES = {
    "global_batch_size": "global batch",
    "hardware": "accelerator",
    "n_nodes": "nodes",
    "accelerators_per_node": "accelerators per node",
}


@dataclass
class Comparison:
    kind: str  # config | scaling | framework | layout | hardware | campaign
    label: str
    runs: list[Run]
    key: dict[str, Any]
    classification: Mode | None = None  # scaling only
    left_out: list[dict[str, str]] = field(default_factory=list)  # framework: runs of other setups, and why
    split: str | None = (
        None  # scaling: the label that parts its points from others of its kind (``label_splits``)
    )

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.label}"

    @property
    def mode(self) -> str | None:
        """strong | weak | time_to_solution | mixed for a scaling series, else None."""
        return self.classification.name if self.classification else None

    @property
    def hardware_note(self) -> str | None:
        """A scaling series whose points ran on different accelerator models says so on itself (``accelerators_by
        _workers``): ``points ran on different accelerators: A at 8; B at 16``; None where they ran on one."""
        if self.kind != "scaling":
            return None
        got = accelerators_text(self.runs)
        return (
            None
            if got is None
            else f"points ran on different accelerators: {got}: its speedups mix scale with hardware"
        )

    def by_workers(self) -> dict[int, list[Run]]:
        out: dict[int, list[Run]] = defaultdict(list)
        for r in self.runs:
            if r.workers is not None:
                out[r.workers].append(r)
        return dict(sorted(out.items()))


class StepFractions(TypedDict):
    """A run's steps after its warm-up (``queries.run_step_fractions``): the share of step time in each part (None:
    not timed), rates over its slowest rank, whether its communication was measured, the slowest rank over the
    fastest."""

    data: float | None
    compute: float | None
    comm: float | None
    optimizer: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    comm_measured: bool | None
    imbalance: float | None


@dataclass
class View:
    runs: list[Run]
    comparisons: list[Comparison]
    campaigns: dict[str, dict[str, Any]]  # campaign name -> recorded spec (may be empty)
    # per run (warm-up excluded): the share of step time in each part, samples/s, whether comm was measured
    fractions: dict[str, StepFractions] = field(default_factory=dict)
    # per run and rank: its step times after warm-up (whether ranks differ, SC15 rule 10)
    rank_times: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    # run id -> why: runs an edited campaign spec superseded, kept in the store and left out of every statistic
    superseded: dict[str, str] = field(default_factory=dict)
    # the campaigns whose runs are pooled into one comparison per setup (``pooling``); empty: by campaign
    pooled: tuple[str, ...] = ()

    def campaign_runs(self, campaign: str | None) -> list[Run]:
        return list(self._by_campaign.get(campaign, ()))

    @cached_property
    def _by_campaign(self) -> dict[str | None, list[Run]]:
        """The runs by campaign, in the view's order (a view's runs are never changed once it is made)."""
        index: dict[str | None, list[Run]] = {}
        for r in self.runs:
            index.setdefault(r.campaign, []).append(r)
        return index

    def of_kind(self, *kinds: str) -> list[Comparison]:
        return [c for c in self.comparisons if c.kind in kinds]

    def keeping(self, runs: list[Run]) -> View:
        """The view of a subset of its runs (the advisor's, without the runs a blocking rule fails)."""
        return View(
            runs,
            comparisons(runs, pooled=bool(self.pooled)),
            self.campaigns,
            self.fractions,
            self.rank_times,
            self.superseded,
            self.pooled,
        )

    def pooling(self) -> View:
        """The view whose comparisons pool the runs of every campaign (repetitions of one setup across campaigns
        are one point), and which names the campaigns pooled; itself when it holds one campaign or none."""
        if len({r.campaign for r in self.runs}) < 2:
            return self
        names = tuple(sorted({r.campaign for r in self.runs if r.campaign is not None}))
        return View(
            self.runs,
            comparisons(self.runs, pooled=True),
            self.campaigns,
            self.fractions,
            self.rank_times,
            self.superseded,
            names,
        )

    def series_of(self, run_id: str) -> list[Comparison]:
        """The scaling series a run is a point of (one, or none; a plain run may also start a layout's series)."""
        return [c for c in self.of_kind("scaling") if any(r.id == run_id for r in c.runs)]

    def group_of(self, run: Run) -> str | None:
        """The campaign a run's numbers are grouped under: its own, or ``POOLED``."""
        return POOLED if self.pooled else run.campaign


def hardware_name(run: Run) -> str:
    """What a run ran on, as a reader names it: the accelerator as recorded (the CPU of a CPU-only run), and the
    platform an MLPerf submission names (``NVIDIA V100-SXM2-16GB (300W) on 1xNVIDIA DGX-1``)."""
    what = run.accelerator or (f"CPU {run.cpu}" if run.cpu else "hardware not recorded")
    platform = (run.mlperf or {}).get("platform")
    return f"{what} on {platform}" if isinstance(platform, str) and platform else what


def accelerators_by_workers(runs: Iterable[Run]) -> list[tuple[str, list[int]]]:
    """Where runs of different accelerator models (``Run.hardware``: two spellings of one chip are one) are
    mixed, each model as recorded with the worker counts it ran, in the order of the workers; empty where every
    run ran on one model (or none recorded it)."""
    workers: dict[str, set[int]] = defaultdict(set)
    names: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        if r.workers and (r.accelerator or r.cpu):
            workers[r.hardware].add(r.workers)
            names[r.hardware].add(hardware_name(r))
    if len(workers) < 2:
        return []
    got = [(" / ".join(sorted(names[k])), sorted(ws)) for k, ws in workers.items()]
    return sorted(got, key=lambda g: (g[1], g[0]))


def accelerators_text(runs: Iterable[Run]) -> str | None:
    """``accelerators_by_workers`` as one line (``V100-16GB at 8; V100-32GB at 16``), None where one model ran."""
    got = accelerators_by_workers(runs)
    return "; ".join(f"{name} at {', '.join(map(str, ws))}" for name, ws in got) if got else None


def _label(key: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in key.items() if v is not None)


def _group(
    runs: list[Run], fields: tuple[str, ...], pooled: bool = False
) -> dict[tuple[Any, ...], list[Run]]:
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    for r in runs:
        groups[tuple(POOLED if pooled and f == "campaign" else r.value(f) for f in fields)].append(r)
    return groups


def _families(runs: Iterable[Run]) -> dict[str, dict[str, list[Run]]]:
    """The runs by framework (``framework_family``: ``tf2.0`` and ``tf2.1`` are one) and by name as recorded."""
    out: dict[str, dict[str, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        out[framework_family(r.framework)][r.framework or "?"].append(r)
    return out


def _one_version_each(runs: list[Run]) -> tuple[list[Run], list[dict[str, str]]]:
    """The runs of one version of each framework (the one with the most runs, then the last named): versions of
    one framework are versions, not frameworks side by side; the other versions left out, and why."""
    kept: list[Run] = []
    left_out = []
    for family, names in sorted(_families(runs).items()):
        chosen = max(names, key=lambda n: (len(names[n]), n))
        kept += names[chosen]
        for name in sorted(set(names) - {chosen}):
            left_out.append(
                {
                    "framework": name,
                    "runs": str(len(names[name])),
                    "differs": f"another version of {family} ({chosen} is compared): versions of one "
                    "framework are not two frameworks (honestscale compare compares them as versions)",
                }
            )
    return kept, left_out


def like_for_like(runs: list[Run]) -> tuple[list[Run], list[dict[str, str]]]:
    """The runs of the setup most frameworks ran (then most runs), when two or more frameworks ran it; every other
    run left out, with what differs from that setup. Versions of one framework (``tf2.0``, ``tf2.1``) are one
    framework: one version of each is compared, the others are left out, and why."""
    found = _group(runs, LIKE)
    ref = max(found, key=lambda k: (len(_families(found[k])), len(found[k]), repr(k)))
    left_out = []
    for key, group in sorted(found.items(), key=lambda kv: repr(kv[0])):
        if key == ref:
            continue
        diff = "; ".join(
            f"{LIKE_NAMES.get(k, k)} {b} (compared: {a})"
            for k, a, b in zip(LIKE, ref, key, strict=True)
            if a != b
        )
        for fw in sorted({r.framework or "?" for r in group}):
            left_out.append(
                {
                    "framework": fw,
                    "runs": str(sum(1 for r in group if (r.framework or "?") == fw)),
                    "differs": diff,
                }
            )
    families = _families(found[ref])
    if len(families) < 2:
        ((family, names),) = families.items()
        why = "no other framework ran this setup"
        # one framework's versions (one system's v2.0 and v2.1 submissions) are not frameworks
        if len(names) >= 2:
            why = (
                f"{' and '.join(sorted(names))} are versions of one framework ({family}), not two frameworks: "
                "nothing is compared here (honestscale compare compares them as versions)"
            )
        left_out += [
            {"framework": fw, "runs": str(len(names[fw])) if len(names) >= 2 else "", "differs": why}
            for fw in sorted(names)
        ]
        return [], left_out
    compared, versions = _one_version_each(found[ref])
    return compared, left_out + versions


def comparisons(runs: list[Run], pooled: bool = False) -> list[Comparison]:
    """The comparisons of the runs, within each campaign, or across them (``pooled``; campaigns stay one each)."""
    compared = [r for r in runs if (r.purpose or "final") in COMPARED]
    out: list[Comparison] = []
    config = (
        "campaign",
        "model",
        "dataset",
        "framework",
        "accelerator",
        "workers",
        "global_batch_size",
        "layout_key",
    )
    for values, group in sorted(_group(compared, config, pooled).items(), key=lambda kv: repr(kv[0])):
        key = dict(zip(config, values, strict=True))
        out.append(Comparison("config", _label(key), group, key))
    scaling = ("campaign", "model", "dataset", "framework", "layout_family")
    series = _group(compared, scaling, pooled)
    for values, group in list(series.items()):
        # a layout's series starts from the one-worker runs (no layout at all) where it has none of its own
        plain = series.get((*values[:-1], None), []) if values[-1] is not None else []
        counts = {r.workers for r in group}
        series[values] = group + [r for r in plain if r.workers == 1 and 1 not in counts]
    splits = label_splits(compared, pooled)
    for values, group in sorted(series.items(), key=lambda kv: repr(kv[0])):
        if len({r.workers for r in group if r.workers}) >= 2:
            key = dict(zip(scaling, values, strict=True))
            c = Comparison("scaling", _label(key), group, key, classify(group), split=splits.get(values))
            out.append(c)
    framework = ("campaign", "model", "dataset", "workers", "layout_key")
    for values, group in sorted(_group(compared, framework, pooled).items(), key=lambda kv: repr(kv[0])):
        if len({r.framework for r in group}) >= 2:
            key = dict(zip(framework, values, strict=True))
            like, left_out = like_for_like(group)
            out.append(Comparison("framework", _label(key), like, key, left_out=left_out))
    # layouts of one model at one number of workers, like for like: one global batch, accelerator and precision
    layout = (
        "campaign",
        "model",
        "dataset",
        "framework",
        "workers",
        "global_batch_size",
        "hardware",
        "precision",
    )
    for values, group in sorted(_group(compared, layout, pooled).items(), key=lambda kv: repr(kv[0])):
        if len({r.layout_key for r in group}) >= 2:
            key = dict(zip(layout, values, strict=True))
            out.append(Comparison("layout", _label(key), group, key))
    for name in sorted({r.campaign for r in compared}, key=lambda c: (c is None, c or "")):
        out.append(
            Comparison(
                "campaign", name or "(none)", [r for r in runs if r.campaign == name], {"campaign": name}
            )
        )
    hardware = ("campaign", "model", "dataset", "framework", "layout_key")
    for values, group in sorted(_group(compared, hardware, pooled).items(), key=lambda kv: repr(kv[0])):
        if len({r.hardware for r in group}) >= 2:
            key = dict(zip(hardware, values, strict=True))
            out.append(Comparison("hardware", _label(key), group, key))
    return out

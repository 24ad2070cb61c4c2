"""Campaign specs (TOML): a grid of runs, repetitions and an optional tuning study, run on this machine.

    [campaign]
    name = "digits-scaling"          # runs are tagged with it
    out = "runs/digits-scaling"      # event files, relative to the spec's folder
    framework = "torch"
    repetitions = 3                  # of every point; seeds seed, seed+1, ...
    until_ci = "5%"                  # optional: add repetitions until the 95 % interval of each point's
    max_repetitions = 20             #   median time is within 5 % of it, up to this many runs (SC15 rule 5)
    seed = 0
    scaling = "strong"               # declared intent (strong, weak, time_to_solution), checked by the linter

    [args]                           # runner options for every run (see the runner's --help)
    model = "mlp"
    dataset = "digits"
    epochs = 30
    target_accuracy = 0.95

    [grid]                           # every combination is one point
    workers = [1, 2]
    batch_size = [64]

    [tuning]                         # optional: runs first; its best trial's values apply to every point
    name = "lr"
    workers = 1
    repetitions = 1
    select = "validation_accuracy"   # the trial with the highest final validation accuracy wins
    grid = { lr = [0.3, 0.1, 0.03] }

Every run of the tuning study is recorded with ``purpose = "tuning"`` (study and trial named);
the grid's runs with ``purpose = "final"`` and the study and trial their values came from.
Run ids are stable and say what defines the run (``<campaign>-<point>-<identity>-r<rep>``, the identity a hash of
its framework, workers, runner options, seed, scaling and tuning study), so running a spec again skips the runs
that already ended and only does the rest, and an edited spec runs its new points (the runs it supersedes are
kept and marked in the store).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honestscale.analysis.repetitions import MAX_REPETITIONS, parse_fraction
from honestscale.errors import HonestscaleError, read_toml
from honestscale.events import SCALING

CAMPAIGN_KEYS = {
    "name",
    "out",
    "framework",
    "repetitions",
    "seed",
    "scaling",
    "description",
    "recipe",
    "until_ci",
    "max_repetitions",
}
REPORT_KEYS = {
    "center": ("median", "mean"),
    "ci": ("nonparametric", "normal"),
    "rate_mean": ("harmonic", "arithmetic"),
}
TUNING_KEYS = {"name", "workers", "repetitions", "select", "grid", "args"}
TOP_KEYS = {"campaign", "args", "grid", "tuning", "report", "tool", "slurm"}
SELECT = {"validation_accuracy"}
LAUNCH_KEYS = {"workers", "framework"}
RESERVED = {"out", "run_id", "campaign", "purpose", "tuning_study", "tuning_trial", "seed", "scaling"}


class SpecError(HonestscaleError):
    """The campaign spec is wrong: the message names the file, the key and the fix."""


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    point: str  # e.g. workers=2,batch_size=64
    framework: str
    workers: int
    args: dict[str, Any]  # runner options
    purpose: str
    seed: int
    tuning_study: str | None = None
    tuning_trial: str | None = None

    @property
    def series(self) -> str:
        """The run id without its repetition: every repetition of one setup."""
        return self.run_id.rsplit("-r", 1)[0]

    def repetition(self, rep: int, base_seed: int) -> RunPlan:
        """Repetition ``rep`` of this run's setup (its own id and seed)."""
        return dataclasses.replace(self, run_id=f"{self.series}-r{rep}", seed=base_seed + rep)

    def runner_argv(self, out: Path, campaign: str, scaling: str | None) -> list[str]:
        argv = [
            "--out",
            str(out),
            "--campaign",
            campaign,
            "--purpose",
            self.purpose,
            "--seed",
            str(self.seed),
            "--name",
            f"{campaign}-{self.point}",
        ]
        if scaling:
            argv += ["--scaling", scaling]
        if self.tuning_study:
            argv += ["--tuning-study", self.tuning_study]
        if self.tuning_trial:
            argv += ["--tuning-trial", self.tuning_trial]
        for key, value in self.args.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is not False and value is not None:
                argv += [flag, str(value)]
        return argv


@dataclass
class Spec:
    path: Path
    name: str
    out: Path
    framework: str
    repetitions: int
    seed: int
    scaling: str | None
    args: dict[str, Any]
    grid: dict[str, list[Any]]
    tuning: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    # add repetitions until the 95 % interval of each point's median is within this fraction of the median ...
    until_ci: float | None = None
    max_repetitions: int = MAX_REPETITIONS  # ... up to this many runs of a point

    def plans(self) -> list[RunPlan]:
        """Every run the spec plans: the tuning trials, then the final runs (their ids do not depend on the
        tuning's outcome, which only fills in the chosen options)."""
        return tuning_plans(self) + final_plans(self, {}, None)

    def frameworks(self) -> list[str]:
        """Every framework the spec's runs use, tuning trials included."""
        return sorted({p.framework for p in self.plans()})


def fraction(value: Any, where: str) -> float:
    """``"5%"`` or ``0.05`` as 0.05; anything else is a SpecError naming ``where``."""
    got = parse_fraction(value)
    if got is None:
        raise SpecError(
            f"{where} = {value!r} is not a fraction of the median",
            'write a percentage or a fraction between 0 and 1, e.g. "5%" or 0.05',
        )
    return got


def with_until_ci(spec: Spec, until_ci: str | None, max_repetitions: int | None) -> Spec:
    """The spec with ``--until-ci`` / ``--max-repetitions`` from the command line (they win over the spec's keys),
    recorded in its raw table so that the store keeps what was asked."""
    if until_ci is None and max_repetitions is None:
        return spec
    camp = dict(spec.raw.get("campaign", {}))
    if until_ci is not None:
        camp["until_ci"] = until_ci
    if max_repetitions is not None:
        camp["max_repetitions"] = max_repetitions
    raw = {**spec.raw, "campaign": camp}
    until, cap = _until_ci(camp, "--until-ci", "--max-repetitions", spec.repetitions)
    return dataclasses.replace(spec, raw=raw, until_ci=until, max_repetitions=cap)


def _until_ci(camp: dict[str, Any], where: str, cap_where: str, repetitions: int) -> tuple[float | None, int]:
    until = camp.get("until_ci")
    cap = camp.get("max_repetitions", MAX_REPETITIONS)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < max(repetitions, 1):
        raise SpecError(
            f"{cap_where} = {cap!r}", f"use a whole number of runs >= repetitions ({repetitions})"
        )
    return (None if until is None else fraction(until, where)), cap


def identity(**defines: Any) -> str:
    """Eight hex digits naming what defines a run: an edited spec plans new run ids, never reuses old ones."""
    text = json.dumps(defines, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:8]


def slug(point: dict[str, Any]) -> str:
    text = ",".join(f"{k}={v}" for k, v in point.items()) or "default"
    return re.sub(r"[^A-Za-z0-9=,._-]", "_", text)


def _check_keys(where: str, table: dict[str, Any], allowed: set[str], path: Path) -> None:
    for key in table:
        if key not in allowed:
            raise SpecError(
                f"{path}: unknown key {key!r} in [{where}]", f"allowed there: {', '.join(sorted(allowed))}"
            )


def _check_runner_keys(where: str, table: dict[str, Any], runner_options: set[str], path: Path) -> None:
    for key in table:
        if key in RESERVED:
            raise SpecError(
                f"{path}: [{where}] sets {key!r}, which the campaign decides",
                "set it in [campaign] (seed, scaling, out) or leave it out",
            )
        if key not in runner_options and key not in LAUNCH_KEYS:
            close = sorted(runner_options | LAUNCH_KEYS, key=lambda o: _distance(o, key))[:3]
            raise SpecError(
                f"{path}: unknown runner option {key!r} in [{where}]",
                f"did you mean one of: {', '.join(close)}?",
            )


def _distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,79}")
MAX_RUNS = 1000  # a bigger plan needs --max-runs: a typo in a grid should not start 10,000 runs


def short(text: object, limit: int = 60) -> str:
    """A value as a message shows it: at most ``limit`` characters (a 50 MB name is never printed back whole)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown):,} characters)"


def _check_name(name: object, path: Path) -> None:
    """A campaign name becomes part of every run id and folder name: 1-80 letters, digits and ._+- ."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SpecError(
            f"{path}: [campaign] name = {short(name)}: not a campaign name",
            "use 1 to 80 letters, digits, '.', '_', '+' or '-', starting with a letter or digit, e.g. "
            'name = "resnet50-scaling"',
        )


def check_size(spec: Spec, plans: list[RunPlan], max_runs: int | None) -> None:
    """Refuse a plan of more runs than ``max_runs`` (MAX_RUNS unless given), and run ids too long for a folder."""
    cap = MAX_RUNS if max_runs is None else max_runs
    if len(plans) > cap:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in spec.grid.items()) or "no grid"
        raise SpecError(
            f"{spec.path}: the spec plans {len(plans):,} runs ({sizes}, x {spec.repetitions} repetitions), more "
            f"than {cap:,}",
            "check the grid (campaign run --dry-run lists the plan); if it is meant, give --max-runs "
            f"{len(plans)}",
        )
    for plan in plans:
        if len(plan.run_id.encode()) > 200:
            raise SpecError(
                f"{spec.path}: run id {short(plan.run_id)} is too long for a folder name",
                "use shorter grid values or a shorter campaign name",
            )


def _check_lists(where: str, grid: dict[str, Any], path: Path) -> None:
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SpecError(
                f"{path}: [{where}] {key} must be a non-empty list", f"write {key} = [value, ...]"
            )


def _check_workers(where: str, values: list[Any], path: Path) -> None:
    """Worker counts are whole numbers of at least 1, checked before anything runs (the tuning study included)."""
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise SpecError(
            f"{path}: [{where}] workers = {values!r}: {', '.join(map(repr, bad))} is not a worker count",
            "worker counts are whole numbers >= 1, e.g. workers = [1, 2, 4]",
        )


def load(path: Path, runner_options: Callable[[str], set[str]]) -> Spec:
    """Read and check a spec; ``runner_options(framework)`` gives the option names its runner accepts."""
    raw = read_toml(path, SpecError, "campaign spec (.toml)")
    _check_keys("top level", raw, TOP_KEYS, path)
    camp = raw.get("campaign")
    if not isinstance(camp, dict) or "name" not in camp:
        raise SpecError(f"{path}: missing [campaign] with a name", 'add [campaign] name = "my-campaign"')
    _check_keys("campaign", camp, CAMPAIGN_KEYS, path)
    _check_name(camp["name"], path)
    framework = str(camp.get("framework", "torch"))
    args = raw.get("args", {})
    grid = raw.get("grid", {})
    for where, table in (("args", args), ("grid", grid)):
        if not isinstance(table, dict):
            raise SpecError(f"{path}: [{where}] must be a table", f"write [{where}] with key = value lines")
    _check_lists("grid", grid, path)
    if "workers" in grid:
        _check_workers("grid", grid["workers"], path)
    if "workers" in args:
        _check_workers("args", [args["workers"]], path)
    report = raw.get("report", {})
    if not isinstance(report, dict):
        raise SpecError(f"{path}: [report] must be a table", 'e.g. [report] center = "median"')
    for key, value in report.items():
        if key not in REPORT_KEYS:
            raise SpecError(
                f"{path}: unknown key {key!r} in [report]", f"allowed there: {', '.join(REPORT_KEYS)}"
            )
        if value not in REPORT_KEYS[key]:
            raise SpecError(f"{path}: [report] {key} = {value!r}", f"one of: {', '.join(REPORT_KEYS[key])}")
    if "tool" in raw:
        from honestscale.lint import parse_suppressions as parse

        parse(raw, str(path), str(camp["name"]))  # suppressions are checked now, not at lint time
    repetitions = camp.get("repetitions", 1)
    if not isinstance(repetitions, int) or repetitions < 1:
        raise SpecError(f"{path}: [campaign] repetitions = {repetitions!r}", "use a whole number >= 1")
    until_ci, cap = _until_ci(
        camp, f"{path}: [campaign] until_ci", f"{path}: [campaign] max_repetitions", repetitions
    )
    tuning = raw.get("tuning")
    if tuning is not None:
        _check_keys("tuning", tuning, TUNING_KEYS, path)
        if "name" not in tuning or not isinstance(tuning.get("grid"), dict) or not tuning["grid"]:
            raise SpecError(
                f"{path}: [tuning] needs a name and a grid of values to try",
                'e.g. [tuning] name = "lr"  grid = { lr = [0.3, 0.1] }',
            )
        _check_lists("tuning.grid", tuning["grid"], path)
        _check_workers("tuning", [tuning.get("workers", 1)], path)
        if "workers" in tuning["grid"]:
            _check_workers("tuning.grid", tuning["grid"]["workers"], path)
        if tuning.get("select", "validation_accuracy") not in SELECT:
            raise SpecError(f"{path}: [tuning] select = {tuning['select']!r}", f"one of: {', '.join(SELECT)}")
    if camp.get("scaling") is not None and camp["scaling"] not in SCALING:
        raise SpecError(f"{path}: [campaign] scaling = {camp['scaling']!r}", f"one of: {', '.join(SCALING)}")
    spec = Spec(
        path=path,
        name=str(camp["name"]),
        out=(path.parent / str(camp.get("out", f"runs/{camp['name']}"))),
        framework=framework,
        repetitions=repetitions,
        seed=int(camp.get("seed", 0)),
        scaling=camp.get("scaling"),
        args=dict(args),
        grid={k: list(v) for k, v in grid.items()},
        tuning=tuning,
        raw=raw,
        until_ci=until_ci,
        max_repetitions=cap,
    )
    # a cross-framework spec may use only the options every framework of its runs accepts
    options = set.intersection(*(runner_options(f) for f in spec.frameworks()))
    _check_runner_keys("args", args, options, path)
    _check_runner_keys("grid", grid, options, path)
    if tuning is not None:
        _check_runner_keys("tuning.grid", tuning["grid"], options, path)
        _check_runner_keys("tuning.args", tuning.get("args", {}), options, path)
    return spec


def points(grid: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    keys = list(grid)
    for combo in itertools.product(*(grid[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def tuning_plans(spec: Spec) -> list[RunPlan]:
    if spec.tuning is None:
        return []
    t = spec.tuning
    plans = []
    for point in points(t["grid"]):
        trial = slug(point)
        args = spec.args | t.get("args", {}) | point
        args.pop("workers", None)
        framework = str(args.pop("framework", spec.framework))
        workers = int(t.get("workers", 1))
        ident = identity(
            framework=framework,
            workers=workers,
            args=args,
            seed=spec.seed,
            scaling=spec.scaling,
            purpose="tuning",
            study=t["name"],
        )
        for rep in range(int(t.get("repetitions", 1))):
            plans.append(
                RunPlan(
                    f"{spec.name}-tune-{t['name']}-{trial}-{ident}-r{rep}",
                    f"tune-{trial}",
                    framework,
                    workers,
                    args,
                    "tuning",
                    spec.seed + rep,
                    t["name"],
                    trial,
                )
            )
    return plans


def final_plans(spec: Spec, tuned: dict[str, Any], trial: str | None) -> list[RunPlan]:
    plans = []
    for point in points(spec.grid):
        args = spec.args | tuned | point
        workers = int(args.pop("workers", 1))
        framework = str(args.pop("framework", spec.framework))
        point_slug = slug(point)
        defined = {k: v for k, v in (spec.args | point).items() if k not in ("workers", "framework")}
        ident = identity(
            framework=framework,
            workers=workers,
            args=defined,
            seed=spec.seed,
            scaling=spec.scaling,
            purpose="final",
            tuning=spec.tuning,
        )
        for rep in range(spec.repetitions):
            plans.append(
                RunPlan(
                    f"{spec.name}-{point_slug}-{ident}-r{rep}",
                    point_slug,
                    framework,
                    workers,
                    args,
                    "final",
                    spec.seed + rep,
                    spec.tuning["name"] if spec.tuning else None,
                    trial,
                )
            )
    return plans


def finished(out: Path, run_id: str) -> bool:
    """Whether rank 0 of ``run_id`` already wrote its run_stop."""
    f = out / run_id / "events-rank0.jsonl"
    try:
        tail = f.read_bytes()[-4096:].splitlines()
    except OSError:
        return False
    for line in reversed(tail):
        try:
            return bool(json.loads(line).get("kind") == "run_stop")
        except ValueError:
            continue
    return False

"""`probe`: a short campaign of one model across worker counts and frameworks, planned and written as a spec.

:func:`prepare` checks the request (worker counts, the model file, which framework environments can run it,
locally or on Slurm), stages the digits data as files when asked for digits, and writes the campaign spec;
the caller runs or submits it and advises. Messages go to ``notify``; nothing here prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honestscale.campaign import launch
from honestscale.campaign import slurm as _slurm
from honestscale.errors import HonestscaleError
from honestscale.runners import usermodel

PROBE_FRAMEWORKS = ("torch", "horovod-torch", "tensorflow", "horovod-tf")  # the runners with --max-samples


@dataclass(frozen=True)
class Probe:
    """What to probe: one model, at these worker counts, with these frameworks, for a fixed number of samples."""

    model: str  # FILE.py:FUNCTION
    workers: str = "1,2"  # comma-separated, as given
    framework: str | None = None  # comma-separated; None: every one whose environment takes the model
    dataset: str = "digits"
    data_path: Path | None = None
    samples: int = 20000
    batch_size: int = 64
    warmup_steps: int = 5
    repetitions: int = 2
    name: str | None = None
    out_dir: Path = Path("runs")


@dataclass(frozen=True)
class SlurmOptions:
    """The probe's Slurm options, one bundle: the spec's [slurm] table when the probe runs on Slurm."""

    on_slurm: bool = False
    partition: str | None = None
    account: str | None = None
    time_limit: str = "00:30:00"
    tasks_per_node: int | None = None
    cpus_per_task: int = 1
    gpus_per_task: int | None = None
    exclusive: bool = True

    def table(self) -> dict[str, Any]:
        """The [slurm] table ({} off Slurm); an option that applies to Slurm alone, given without --slurm, is
        refused rather than ignored."""
        optional = {
            "account": self.account,
            "tasks_per_node": self.tasks_per_node,
            "gpus_per_task": self.gpus_per_task,
        }
        given = [
            name for name, value in (("partition", self.partition), *optional.items()) if value is not None
        ]
        if not self.on_slurm:
            if given:
                options = ", ".join("--" + name.replace("_", "-") for name in given)
                raise HonestscaleError(f"{options} only apply to Slurm", "add --slurm, or leave them out")
            return {}
        table: dict[str, Any] = {
            "partition": self.partition or default_partition(),
            "time": self.time_limit,
            "cpus_per_task": self.cpus_per_task,
        }
        table |= {k: v for k, v in optional.items() if v is not None}
        if self.exclusive:
            table["sbatch"] = ["--exclusive"]
        return table


def prepare(probe: Probe, slurm: SlurmOptions, notify: Callable[[str], None]) -> tuple[Path, str]:
    """Check the probe, write its spec; return the spec's path and the campaign's name."""
    slurm_table = slurm.table()
    counts = _worker_counts(probe.workers)
    if not usermodel.is_spec(probe.model):
        raise HonestscaleError(
            f"--model {probe.model!r} is not FILE.py:FUNCTION", "e.g. --model examples/byo/mycnn.py:build"
        )
    data_path = ["--data-path", str(probe.data_path)] if probe.data_path else []
    runner_args = ["--model", probe.model, "--dataset", probe.dataset, *data_path]
    usable = _usable_frameworks(probe.framework, runner_args, slurm_table, notify)
    campaign = probe.name or f"probe-{usermodel.label(probe.model)}"
    probe.out_dir.mkdir(parents=True, exist_ok=True)
    spec = probe.out_dir / f"{campaign}.toml"
    args = _runner_args(probe)
    spec.write_text(
        probe_spec(campaign, probe.repetitions, args, usable, counts, slurm_table), encoding="utf-8"
    )
    where = " on Slurm" if slurm_table else ""
    notify(
        f"probe {campaign}: {len(usable)} framework(s) x {len(counts)} worker count(s) x {probe.repetitions} "
        f"run(s) of {probe.samples:,} samples{where}; spec {spec}"
    )
    return spec, campaign


def _worker_counts(workers: str) -> list[int]:
    try:
        counts = sorted({int(w) for w in workers.split(",") if w.strip()})
    except ValueError:
        raise HonestscaleError(f"--workers {workers!r}", "give whole numbers, e.g. --workers 1,2,4") from None
    if not counts or counts[0] < 1:
        raise HonestscaleError(f"--workers {workers!r}", "give worker counts of at least 1, e.g. 1,2,4")
    return counts


def _usable_frameworks(
    framework: str | None, runner_args: list[str], slurm_table: dict[str, Any], notify: Callable[[str], None]
) -> list[str]:
    """The frameworks asked for (each must work), or every one whose environment is here and takes the model
    (the others skipped and said)."""
    chosen = [f.strip() for f in framework.split(",")] if framework else []
    for f in chosen:
        if f not in PROBE_FRAMEWORKS:
            raise HonestscaleError(
                f"--framework {f}: probe runs {', '.join(PROBE_FRAMEWORKS)}",
                "train other frameworks with honestscale run or a campaign",
            )
    usable, other_family = [], []
    for f in chosen or PROBE_FRAMEWORKS:
        why = _cannot_run(f, runner_args, slurm_table, strict=bool(chosen))
        if why is None:
            usable.append(f)
        elif why.startswith("family: "):
            other_family.append(f"{f}: {why.removeprefix('family: ')}")
        else:
            notify(why)
    if not usable:
        raise HonestscaleError(
            "no framework environment can run this model here"
            + "".join(f"\n  {line}" for line in other_family),
            "see docs/runners.md: Framework environments",
        )
    return usable


def _cannot_run(f: str, runner_args: list[str], slurm_table: dict[str, Any], strict: bool) -> str | None:
    """Why framework ``f`` cannot probe this model (None: it can); ``strict`` (the user chose it) raises instead.
    A model of the other family (a Keras model for torch, or the reverse) says "family: ..."."""
    try:
        python = launch.python_for(f)
        launch.check_installed(f, python)
    except launch.LaunchError as exc:
        if strict:
            raise HonestscaleError(str(exc), "create that environment or leave the framework out") from None
        return f"skipping {f}: {exc}"
    if slurm_table:
        try:  # the compute nodes' interpreter is this environment's: can it start this framework there?
            _slurm.check_framework(_slurm.SlurmSpec(**slurm_table), f)
        except HonestscaleError as exc:
            if strict:
                raise
            return f"skipping {f} on Slurm: {exc.message}"
    try:
        launch.check_user_files(f, python, runner_args)
    except launch.WrongFamily as exc:  # a Keras model is not probed with torch, nor the reverse
        if strict:
            raise HonestscaleError(str(exc), "leave that framework out; no run was started") from None
        return f"family: {exc}"
    except launch.LaunchError as exc:
        raise HonestscaleError(str(exc), "fix the model file; no run was started") from None
    return None


def _runner_args(probe: Probe) -> dict[str, Any]:
    """The spec's [args]: user files by absolute path (the spec lives in --out), digits staged as files."""
    dataset, data_path = probe.dataset, probe.data_path
    if dataset == "digits":  # read from files, as real training reads its data: I/O is part of what is probed
        data_path, dataset = stage_digits(probe.out_dir / "digits-npy"), "memmap"
    args: dict[str, Any] = {
        "model": usermodel.resolved(probe.model),
        "dataset": usermodel.resolved(dataset) if usermodel.is_spec(dataset) else dataset,
        "batch_size": probe.batch_size,
        "max_samples": probe.samples,
        "epochs": 1000,
        "warmup_steps": probe.warmup_steps,
        "eval_every": 1000,
        "sample_interval": 0.5,
    }
    if data_path:
        args["data_path"] = str(data_path.resolve())
    return args


def stage_digits(folder: Path) -> Path:
    """scikit-learn's digits, split as every runner splits it, saved as a memmap dataset (NumPy files)."""
    import numpy as np

    from honestscale.runners.data import digits_arrays

    folder.mkdir(parents=True, exist_ok=True)
    for split, (x, y) in digits_arrays().items():
        np.save(folder / f"{split}_x.npy", x)
        np.save(folder / f"{split}_y.npy", y)
    return folder


def default_partition() -> str:
    """Slurm's default partition (sinfo marks it with *)."""
    names = _slurm.command(["sinfo", "-h", "-o", "%P"], "sinfo").split()
    default = [n.rstrip("*") for n in names if n.endswith("*")]
    if not default:
        raise HonestscaleError(
            f"this Slurm has no default partition (sinfo: {', '.join(names) or 'none'})", "give --partition"
        )
    return default[0]


def probe_spec(
    name: str,
    repetitions: int,
    args: dict[str, Any],
    frameworks: list[str],
    workers: list[int],
    slurm: dict[str, Any] | None = None,
) -> str:
    def toml(v: Any) -> str:
        return json.dumps(v)  # strings, numbers and lists of them are the same in TOML and JSON

    lines = [
        "# written by honestscale probe: short fixed-size trainings of one model",
        "[campaign]",
        f"name = {toml(name)}",
        'out = "."',
        f"repetitions = {repetitions}",
        'scaling = "strong"',
        "",
        "[args]",
    ]
    lines += [f"{k} = {toml(v)}" for k, v in args.items()]
    lines += ["", "[grid]", f"framework = {toml(frameworks)}", f"workers = {toml(workers)}", "",
              "[tool.honestscale.lint]",
              'ignore = [{ code = "HS110", reason = "a probe trains a fixed number of samples on purpose: it measures '
              'where step time goes, not time to a converged model" }]']  # fmt: skip
    if slurm:
        lines += ["", "[slurm]", *(f"{k} = {toml(v)}" for k, v in slurm.items())]
    return "\n".join(lines) + "\n"

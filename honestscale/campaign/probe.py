"""`probe`: a short campaign of one model across worker counts and frameworks, planned and written as a spec.

:func:`prepare` checks the request (worker counts, the model file, which framework environments can run it,
locally or on Slurm), stages the digits data as files when asked for digits, and writes the campaign spec;
the caller runs or submits it and advises. Messages go to ``notify``; nothing here prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from honestscale.campaign import launch
from honestscale.campaign import slurm as _slurm
from honestscale.errors import HonestscaleError
from honestscale.runners import usermodel


def prepare(
    *,
    model: str,
    workers: str,
    framework: str | None,
    dataset: str,
    data_path: Path | None,
    samples: int,
    batch_size: int,
    warmup_steps: int,
    repetitions: int,
    name: str | None,
    out_dir: Path,
    slurm: bool,
    partition: str | None,
    account: str | None,
    time_limit: str,
    tasks_per_node: int | None,
    cpus_per_task: int,
    gpus_per_task: int | None,
    exclusive: bool,
    notify: Callable[[str], None],
) -> tuple[Path, str]:
    """Check the probe, write its spec; return the spec's path and the campaign's name."""

    slurm_given = [n for n, v in (("--partition", partition), ("--account", account), ("--tasks-per-node",
                   tasks_per_node), ("--gpus-per-task", gpus_per_task)) if v is not None]  # fmt: skip
    if slurm_given and not slurm:
        raise HonestscaleError(
            f"{', '.join(slurm_given)} only apply to Slurm", "add --slurm, or leave them out"
        )
    slurm_table: dict[str, Any] = {}
    if slurm:
        slurm_table = {"partition": partition or default_partition(), "time": time_limit,
                       "cpus_per_task": cpus_per_task}  # fmt: skip
        slurm_table |= {k: v for k, v in (("account", account), ("tasks_per_node", tasks_per_node),
                        ("gpus_per_task", gpus_per_task)) if v is not None}  # fmt: skip
        if exclusive:
            slurm_table["sbatch"] = ["--exclusive"]

    try:
        counts = sorted({int(w) for w in workers.split(",") if w.strip()})
    except ValueError:
        raise HonestscaleError(f"--workers {workers!r}", "give whole numbers, e.g. --workers 1,2,4") from None
    if not counts or counts[0] < 1:
        raise HonestscaleError(f"--workers {workers!r}", "give worker counts of at least 1, e.g. 1,2,4")
    if not usermodel.is_spec(model):
        raise HonestscaleError(
            f"--model {model!r} is not FILE.py:FUNCTION", "e.g. --model examples/byo/mycnn.py:build"
        )
    runner_args = ["--model", model, "--dataset", dataset] + (
        ["--data-path", str(data_path)] if data_path else []
    )
    probe_frameworks = ["torch", "horovod-torch", "tensorflow", "horovod-tf"]  # those with --max-samples
    chosen = [f.strip() for f in framework.split(",")] if framework else []
    for f in chosen:
        if f not in probe_frameworks:
            raise HonestscaleError(f"--framework {f}: probe runs {', '.join(probe_frameworks)}",
                                   "train other frameworks with honestscale run or a campaign")  # fmt: skip
    usable, other_family = [], []
    for f in chosen or probe_frameworks:
        try:
            python = launch.python_for(f)
            launch.check_installed(f, python)
        except launch.LaunchError as exc:
            if chosen:
                raise HonestscaleError(
                    str(exc), "create that environment or leave the framework out"
                ) from None
            notify(f"skipping {f}: {exc}")
            continue
        if slurm:
            try:  # the compute nodes' interpreter is this environment's: can it start this framework there?
                _slurm.check_framework(_slurm.SlurmSpec(**slurm_table), f)
            except HonestscaleError as exc:
                if chosen:
                    raise
                notify(f"skipping {f} on Slurm: {exc.message}")
                continue
        try:
            launch.check_user_files(f, python, runner_args)
        except launch.WrongFamily as exc:  # a Keras model is not probed with torch, nor the reverse
            if chosen:
                raise HonestscaleError(str(exc), "leave that framework out; no run was started") from None
            other_family.append(f"{f}: {exc}")
            continue
        except launch.LaunchError as exc:
            raise HonestscaleError(str(exc), "fix the model file; no run was started") from None
        usable.append(f)
    if not usable:
        raise HonestscaleError(
            "no framework environment can run this model here"
            + "".join(f"\n  {line}" for line in other_family),
            "see docs/runners.md: Framework environments",
        )
    campaign = name or f"probe-{usermodel.label(model)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    if dataset == "digits":  # read from files, as real training reads its data: I/O is part of what is probed
        data_path, dataset = stage_digits(out_dir / "digits-npy"), "memmap"
    spec = out_dir / f"{campaign}.toml"
    absolute = {  # the spec lives in --out: user files are named by absolute path
        "model": usermodel.resolved(model),
        "dataset": usermodel.resolved(dataset) if usermodel.is_spec(dataset) else dataset,
    }
    args = {**absolute, "batch_size": batch_size, "max_samples": samples, "epochs": 1000,
            "warmup_steps": warmup_steps, "eval_every": 1000, "sample_interval": 0.5}  # fmt: skip
    if data_path:
        args["data_path"] = str(data_path.resolve())
    spec.write_text(probe_spec(campaign, repetitions, args, usable, counts, slurm_table), encoding="utf-8")
    notify(f"probe {campaign}: {len(usable)} framework(s) x {len(counts)} worker count(s) x {repetitions} "
           f"run(s) of {samples:,} samples{' on Slurm' if slurm else ''}; spec {spec}")  # fmt: skip
    return spec, campaign


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

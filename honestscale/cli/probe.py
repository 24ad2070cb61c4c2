"""`probe`: a short campaign that measures this machine and advises from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from honestscale.cli._app import StoreOpt, WaitOpt, _store, app, err, out
from honestscale.cli.campaign import _run_campaign
from honestscale.cli.slurm import _collect_campaign, _submit_campaign, _wait_for_jobs
from honestscale.errors import HonestscaleError
from honestscale.store import campaigns


@app.command()
def probe(
    model: Annotated[
        str, typer.Option(help="Your model: FILE.py:FUNCTION returning a plain single-device model.")
    ],
    workers: Annotated[str, typer.Option(help="Worker counts to try, comma-separated.")] = "1,2",
    framework: Annotated[
        str | None,
        typer.Option(
            help="Frameworks to try, comma-separated [default: every one whose environment is here and "
            "that takes this model: torch and horovod-torch for an nn.Module, tensorflow and horovod-tf for a "
            "Keras Model]."
        ),
    ] = None,
    dataset: Annotated[
        str, typer.Option(help="digits, synthetic, memmap (with --data-path) or FILE.py:FUNCTION.")
    ] = ("digits"),
    data_path: Annotated[Path | None, typer.Option(help="Folder of a memmap dataset.")] = None,
    samples: Annotated[int, typer.Option(help="Training samples per run (all workers together).")] = 20000,
    batch_size: Annotated[int, typer.Option(help="Global batch (split over the workers).")] = 64,
    warmup_steps: Annotated[
        int, typer.Option(help="First steps of each run flagged as warm-up, not timed.")
    ] = 5,
    repetitions: Annotated[int, typer.Option(help="Runs per point (2+ give projection intervals).")] = 2,
    name: Annotated[str | None, typer.Option(help="Campaign name [default: probe-<model>].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the spec, logs and events.")] = Path(
        "runs"
    ),
    slurm: Annotated[
        bool, typer.Option("--slurm", help="Submit the runs to Slurm, wait for them, collect, then advise.")
    ] = False,
    partition: Annotated[
        str | None, typer.Option(help="With --slurm: the partition [default: Slurm's default one].")
    ] = None,
    account: Annotated[str | None, typer.Option(help="With --slurm: the account to charge.")] = None,
    time_limit: Annotated[str, typer.Option("--time", help="With --slurm: time limit per run.")] = "00:30:00",
    tasks_per_node: Annotated[
        int | None, typer.Option(help="With --slurm: ranks per node [default: every rank on one node].")
    ] = None,
    cpus_per_task: Annotated[int, typer.Option(help="With --slurm: CPU cores per rank.")] = 1,
    gpus_per_task: Annotated[
        int | None, typer.Option(help="With --slurm: GPUs per rank (omit on CPU partitions).")
    ] = None,
    exclusive: Annotated[
        bool,
        typer.Option(
            "--exclusive/--shared",
            help="With --slurm: each run on nodes of its own (sbatch --exclusive), as HS208 asks; --shared lets "
            "runs share nodes with other jobs (measurements then fail HS208).",
        ),
    ] = True,
    poll: Annotated[float, typer.Option(help="With --slurm: seconds between squeue polls.")] = 10.0,
    store: StoreOpt = None,
    wait: WaitOpt = 30.0,
) -> None:
    """Short fixed-size trainings of your model across worker counts and frameworks, then the advisor's verdict.

    Every run trains the same number of samples (--samples; the first --warmup-steps steps are recorded as
    warm-up and left out of the timings), so time and throughput compare across worker counts. The probe
    writes a campaign spec (<out>/<name>.toml, rerun it with `honestscale campaign run`), runs it, ingests
    every run, and prints `honestscale advise`.

    With --slurm the spec gets a [slurm] table from the options below and is submitted (one job array per
    point, every rank started by srun, each run on nodes of its own unless --shared); the probe waits for
    the jobs (squeue/scontrol), collects them (a job Slurm killed is recorded, not dropped) and advises.
    --out must be on a filesystem the compute nodes share. Interrupted while waiting, the jobs keep
    running: `honestscale campaign status|collect <spec>`.

      honestscale probe --model examples/byo/mycnn.py:build --workers 1,2

      honestscale probe --model mycnn.py:build --workers 1,2,4,8 --slurm --partition gpu --gpus-per-task 1 \\
          --tasks-per-node 4 --cpus-per-task 8
    """
    from honestscale.analysis import advise as _advise
    from honestscale.campaign import launch
    from honestscale.campaign import slurm as _slurm
    from honestscale.runners import usermodel

    slurm_given = [n for n, v in (("--partition", partition), ("--account", account), ("--tasks-per-node",
                   tasks_per_node), ("--gpus-per-task", gpus_per_task)) if v is not None]  # fmt: skip
    if slurm_given and not slurm:
        raise HonestscaleError(
            f"{', '.join(slurm_given)} only apply to Slurm", "add --slurm, or leave them out"
        )
    slurm_table: dict[str, Any] = {}
    if slurm:
        slurm_table = {"partition": partition or _default_partition(), "time": time_limit,
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
            err.print(f"skipping {f}: {exc}", highlight=False)
            continue
        if slurm:
            try:  # the compute nodes' interpreter is this environment's: can it start this framework there?
                _slurm.check_framework(_slurm.SlurmSpec(**slurm_table), f)
            except HonestscaleError as exc:
                if chosen:
                    raise
                err.print(f"skipping {f} on Slurm: {exc.message}", highlight=False)
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
            "see README: Framework environments",
        )
    campaign = name or f"probe-{usermodel.label(model)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    if dataset == "digits":  # read from files, as real training reads its data: I/O is part of what is probed
        data_path, dataset = _stage_digits(out_dir / "digits-npy"), "memmap"
    spec = out_dir / f"{campaign}.toml"
    absolute = {  # the spec lives in --out: user files are named by absolute path
        "model": usermodel.resolved(model),
        "dataset": usermodel.resolved(dataset) if usermodel.is_spec(dataset) else dataset,
    }
    args = {**absolute, "batch_size": batch_size, "max_samples": samples, "epochs": 1000,
            "warmup_steps": warmup_steps, "eval_every": 1000, "sample_interval": 0.5}  # fmt: skip
    if data_path:
        args["data_path"] = str(data_path.resolve())
    spec.write_text(_probe_spec(campaign, repetitions, args, usable, counts, slurm_table), encoding="utf-8")
    err.print(f"probe {campaign}: {len(usable)} framework(s) x {len(counts)} worker count(s) x {repetitions} "
              f"run(s) of {samples:,} samples{' on Slurm' if slurm else ''}; spec {spec}", highlight=False)  # fmt: skip
    if slurm:
        _submit_campaign(spec, store, dry_run=False, arrays=True, wait=wait)
        try:
            _wait_for_jobs(spec, store, wait, poll)
        except KeyboardInterrupt:
            err.print(f"stopped waiting; the jobs go on running: follow with `honestscale campaign status {spec}`, "
                      f"then `honestscale campaign collect {spec}` and `honestscale advise --campaign {campaign}`",
                      highlight=False)  # fmt: skip
            raise typer.Exit(130) from None
        _collect_campaign(spec, store, wait)
        with _store(store, read_only=True, wait=wait) as con:
            not_ok = campaigns.runs_not_ok(con, campaign)
    else:
        not_ok = _run_campaign(spec, store, False, wait)
    from honestscale.store import queries

    with _store(store, read_only=True, wait=wait) as con:
        queries.check_campaign(con, campaign)
        advice = _advise.advise(con, campaign)
    out.print("\nverdict", style="bold")
    for line in _advise.lines(advice):
        out.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(1 if not_ok else 0)


def _stage_digits(folder: Path) -> Path:
    """scikit-learn's digits, split as every runner splits it, saved as a memmap dataset (NumPy files)."""
    import numpy as np

    from honestscale.runners.data import digits_arrays

    folder.mkdir(parents=True, exist_ok=True)
    for split, (x, y) in digits_arrays().items():
        np.save(folder / f"{split}_x.npy", x)
        np.save(folder / f"{split}_y.npy", y)
    return folder


def _default_partition() -> str:
    """Slurm's default partition (sinfo marks it with *)."""
    from honestscale.campaign import slurm as _slurm

    names = _slurm.command(["sinfo", "-h", "-o", "%P"], "sinfo").split()
    default = [n.rstrip("*") for n in names if n.endswith("*")]
    if not default:
        raise HonestscaleError(
            f"this Slurm has no default partition (sinfo: {', '.join(names) or 'none'})", "give --partition"
        )
    return default[0]


def _probe_spec(
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

"""`probe`: a short campaign that measures this machine and advises from it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honestscale.cli._app import StoreOpt, WaitOpt, app, err, judged, out
from honestscale.cli.analysis import advised
from honestscale.cli.campaign import access, run_campaign
from honestscale.cli.slurm import collect_campaign, submit_campaign, wait_for_jobs


@app.command()
def probe(
    model: Annotated[
        str, typer.Option(help="Your model: FILE.py:FUNCTION returning a plain single-device model.")
    ],
    workers: Annotated[str, typer.Option(help="Worker counts to try, comma-separated.")] = "1,2",
    framework: Annotated[
        str | None,
        typer.Option(
            help="Frameworks to try, comma-separated \\[default: every one whose environment is here and "
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
    name: Annotated[str | None, typer.Option(help="Campaign name \\[default: probe-<model>].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the spec, logs and events.")] = Path(
        "runs"
    ),
    slurm: Annotated[
        bool, typer.Option("--slurm", help="Submit the runs to Slurm, wait for them, collect, then advise.")
    ] = False,
    partition: Annotated[
        str | None, typer.Option(help="With --slurm: the partition \\[default: Slurm's default one].")
    ] = None,
    account: Annotated[str | None, typer.Option(help="With --slurm: the account to charge.")] = None,
    time_limit: Annotated[str, typer.Option("--time", help="With --slurm: time limit per run.")] = "00:30:00",
    tasks_per_node: Annotated[
        int | None, typer.Option(help="With --slurm: ranks per node \\[default: every rank on one node].")
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

    With --slurm the spec gets a \\[slurm] table from the options below and is submitted (one job array per
    point, every rank started by srun, each run on nodes of its own unless --shared); the probe waits for
    the jobs (squeue/scontrol), collects them (a job Slurm killed is recorded, not dropped) and advises.
    --out must be on a filesystem the compute nodes share. Interrupted while waiting, the jobs keep
    running: `honestscale campaign status|collect <spec>`.

      honestscale probe --model examples/byo/mycnn.py:build --workers 1,2

      honestscale probe --model mycnn.py:build --workers 1,2,4,8 --slurm --partition gpu --gpus-per-task 1 \\
          --tasks-per-node 4 --cpus-per-task 8
    """
    from honestscale.campaign import probe as planned
    from honestscale.campaign import shared

    request = planned.Probe(
        model=model,
        workers=workers,
        framework=framework,
        dataset=dataset,
        data_path=data_path,
        samples=samples,
        batch_size=batch_size,
        warmup_steps=warmup_steps,
        repetitions=repetitions,
        name=name,
        out_dir=out_dir,
    )
    on_slurm = planned.SlurmOptions(
        on_slurm=slurm,
        partition=partition,
        account=account,
        time_limit=time_limit,
        tasks_per_node=tasks_per_node,
        cpus_per_task=cpus_per_task,
        gpus_per_task=gpus_per_task,
        exclusive=exclusive,
    )
    spec, campaign = planned.prepare(
        request, on_slurm, lambda message: err.print(message, highlight=False, markup=False)
    )
    if slurm:
        submit_campaign(spec, store, dry_run=False, arrays=True, wait=wait)
        try:
            wait_for_jobs(spec, store, wait, poll)
        except KeyboardInterrupt:
            err.print(f"stopped waiting; the jobs go on running: follow with `honestscale campaign status {spec}`, "
                      f"then `honestscale campaign collect {spec}` and `honestscale advise --campaign {campaign}`",
                      highlight=False)  # fmt: skip
            raise typer.Exit(130) from None
        collect_campaign(spec, store, wait)
        not_ok = shared.runs_not_ok(access(store, wait), campaign)
    else:
        not_ok = run_campaign(spec, store, False, wait)
    out.print("\nverdict", style="bold")
    advised(judged(store, campaign, wait=wait), campaign)
    raise typer.Exit(1 if not_ok else 0)

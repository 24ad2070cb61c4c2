"""Campaigns on Slurm: sbatch scripts from a campaign spec, one squeue call to track them, collection.

The spec's ``[slurm]`` table says how runs are placed::

    [slurm]
    partition = "gpu"            # required
    account = "proj123"
    qos = "normal"
    time = "00:30:00"            # per run
    tasks_per_node = 4           # ranks per node (default: the workers, on one node)
    cpus_per_task = 8
    gpus_per_task = 1            # omit on CPU partitions
    modules = ["cuda/12.4"]      # `module load` before the run
    container = "/images/pytorch.sif"   # run inside Apptainer/Singularity (--nv when GPUs are asked)
    max_in_flight = 8            # array throttle: repetitions of a point running at once
    python = "/path/to/venv/bin/python"  # the interpreter on the compute nodes [default: the framework's
                                         # environment, as `honestscale run` finds it]
    mpi = "pmix"                 # Horovod's ranks: srun --mpi=pmix (or "pmi2"), or "horovodrun" (Gloo) in the job
    [slurm.env]
    NCCL_DEBUG = "WARN"

Each grid point becomes one job array (one task per repetition), each task one ``srun`` launching
every rank of the run, so each rank finds its rank, world size and master address from Slurm
(MXNet's workers derive the scheduler and server roles from them). Horovod's frameworks are started by
``srun --mpi=pmix`` too (Horovod built with MPI: Slurm's PMIx plugin wires Open MPI up, each rank is one
Slurm task); with ``mpi = "horovodrun"`` (a Gloo-only build) ``horovodrun --gloo`` starts them on the
allocated hosts instead.
Tuning trials are arrays too. Everything is checked before anything is submitted.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from honestscale.campaign import launch
from honestscale.campaign import spec as _campaign
from honestscale.errors import HonestscaleError
from honestscale.store import Connection, campaigns

SLURM_KEYS = {
    "partition", "account", "qos", "time", "tasks_per_node", "nodes", "cpus_per_task", "gpus_per_task", "modules",
    "container", "max_in_flight", "python", "env", "sbatch", "mpi",
}  # fmt: skip
TERMINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE"}  # fmt: skip
STATUS_OF = {"TIMEOUT": "timeout", "DEADLINE": "timeout", "CANCELLED": "cancelled", "PREEMPTED": "cancelled",
             "FAILED": "failed", "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed",
             "COMPLETED": "failed"}  # a COMPLETED job without a run_stop: the runner died silently  # fmt: skip


MPI_MODES = ("pmix", "pmi2", "horovodrun")


class SlurmError(HonestscaleError):
    """Slurm refused something, or is not there."""


@dataclass
class SlurmSpec:
    partition: str
    account: str | None = None
    qos: str | None = None
    time: str = "01:00:00"
    tasks_per_node: int | None = None
    nodes: int | None = None
    cpus_per_task: int = 1
    gpus_per_task: int | None = None
    modules: list[str] = field(default_factory=list)
    container: str | None = None
    max_in_flight: int | None = None
    python: str = ""  # empty: each framework's own environment (launch.python_for)
    env: dict[str, str] = field(default_factory=dict)
    sbatch: list[str] = field(default_factory=list)
    mpi: str = "pmix"  # how Horovod's ranks start: srun --mpi=pmix|pmi2, or horovodrun (Gloo) inside the job


def parse(spec: _campaign.Spec) -> SlurmSpec:
    raw = spec.raw.get("slurm")
    path = spec.path
    if not isinstance(raw, dict):
        raise _campaign.SpecError(f"{path}: no [slurm] table: Slurm needs at least a partition",
                                  'add [slurm] partition = "<partition>" (sinfo lists them)')  # fmt: skip
    for key in raw:
        if key not in SLURM_KEYS:
            raise _campaign.SpecError(
                f"{path}: unknown key {key!r} in [slurm]", f"allowed there: {', '.join(sorted(SLURM_KEYS))}"
            )
    if not raw.get("partition"):
        raise _campaign.SpecError(
            f"{path}: [slurm] has no partition", 'add partition = "<partition>" (sinfo lists them)'
        )
    if not re.fullmatch(r"(\d+-)?\d{1,2}(:\d{2}){0,2}", str(raw.get("time", "01:00:00"))):
        raise _campaign.SpecError(
            f"{path}: [slurm] time = {raw['time']!r}", 'use Slurm\'s format, e.g. "00:30:00" or "2-00:00:00"'
        )
    if str(raw.get("mpi", "pmix")) not in MPI_MODES:
        raise _campaign.SpecError(
            f"{path}: [slurm] mpi = {raw['mpi']!r}",
            'use "pmix" or "pmi2" (srun --mpi=..., Horovod built with MPI) or "horovodrun" (Gloo)',
        )
    out = SlurmSpec(**raw)
    out.env = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
    return out


def _shape(plan: _campaign.RunPlan, s: SlurmSpec, path: Path) -> tuple[int, int]:
    """(nodes, tasks per node) for a run of ``plan.workers`` ranks; refuses impossible shapes."""
    per_node = s.tasks_per_node or plan.workers
    nodes = s.nodes or -(-plan.workers // per_node)
    if plan.workers > nodes * per_node:
        raise _campaign.SpecError(
            f"{path}: {plan.workers} workers do not fit {nodes} node(s) x {per_node} task(s) per node",
            "raise [slurm] nodes or tasks_per_node, or lower the workers",
        )
    if plan.workers % nodes:
        raise _campaign.SpecError(f"{path}: {plan.workers} workers cannot be spread evenly over {nodes} nodes",
                                  "use a worker count divisible by the node count")  # fmt: skip
    return nodes, plan.workers // nodes


def python_of(s: SlurmSpec, framework: str) -> str:
    """The interpreter that runs ``framework`` on the compute nodes: [slurm] python, else its environment."""
    return s.python or launch.python_for(framework)


def check_framework(s: SlurmSpec, framework: str) -> None:
    try:
        launch.check_installed(framework, python_of(s, framework)) if not s.container else None
    except launch.LaunchError as exc:
        raise SlurmError(str(exc), "install the framework for the [slurm] python, or set container") from None
    if framework in launch.HOROVOD and s.mpi != "horovodrun":
        _check_srun_mpi(s, framework)


@cache
def _mpi_plugins() -> frozenset[str]:
    """The MPI plugins ``srun --mpi=list`` names (empty when there is no srun or it says nothing readable)."""
    if not shutil.which("srun"):
        return frozenset()
    listed = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True, timeout=60, check=False)
    if listed.returncode != 0:
        return frozenset()
    return frozenset(re.findall(r"\b(pmix|pmi2|cray_shasta|none)\b", listed.stdout + listed.stderr))


def _check_srun_mpi(s: SlurmSpec, framework: str) -> None:
    """``srun --mpi=<plugin>`` needs the plugin in this Slurm and a Horovod built with MPI."""
    plugins = _mpi_plugins()
    if plugins and s.mpi not in plugins:
        raise SlurmError(f"[slurm] mpi = {s.mpi!r}: this Slurm has no such MPI plugin (srun --mpi=list: "
                         f"{', '.join(sorted(plugins))})",
                         'use one it lists, or mpi = "horovodrun" to start the ranks with Horovod\'s Gloo')  # fmt: skip
    if s.container:
        return  # the container's Horovod: checked when the job starts (the ranks then disagree on the world)
    python = python_of(s, framework)
    module = launch.HOROVOD_MODULE[framework]
    code = f"import {module} as h; print(h.mpi_built())"
    found = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    if found.stdout.strip() != "True":
        raise SlurmError(
            f"the Horovod of {python} was built without MPI, which srun --mpi={s.mpi} needs"
            + (
                f" ({found.stderr.strip().splitlines()[-1]})"
                if found.returncode and found.stderr.strip()
                else ""
            ),
            "rebuild it with Open MPI (apt-get install openmpi-bin libopenmpi-dev; bash scripts/build-horovod-env), "
            'or set [slurm] mpi = "horovodrun" to start the ranks with horovodrun --gloo',
        )


@dataclass
class Job:
    """One sbatch submission: an array of repetitions of one point (or a single run)."""

    point: str
    plans: list[_campaign.RunPlan]
    script: str
    array: bool


def scripts(
    spec: _campaign.Spec, s: SlurmSpec, plans: list[_campaign.RunPlan], *, arrays: bool = True
) -> list[Job]:
    """The sbatch scripts: one array per point (repetitions), or one job per run."""
    groups: dict[tuple[str, str], list[_campaign.RunPlan]] = {}
    for p in plans:
        groups.setdefault((p.purpose, p.point), []).append(p)
    jobs = []
    for (_purpose, point), group in groups.items():
        if arrays and len(group) > 1 and all(p.run_id.endswith(f"-r{p.seed - spec.seed}") for p in group):
            jobs.append(Job(point, group, _script(spec, s, group, array=True), True))
        else:
            jobs.extend(Job(point, [p], _script(spec, s, [p], array=False), False) for p in group)
    return jobs


def _script(spec: _campaign.Spec, s: SlurmSpec, group: list[_campaign.RunPlan], *, array: bool) -> str:
    first = group[0]
    nodes, per_node = _shape(first, s, spec.path)
    out = spec.out.resolve()
    run_id = first.run_id.rsplit("-r", 1)[0] + "-r${REP}" if array else first.run_id
    argv = first.runner_argv(out, spec.name, spec.scaling)
    i = argv.index("--seed")
    argv[i + 1] = "${SEED}" if array else argv[i + 1]
    module = " ".join(launch.runner_command(first.framework)[1:])
    # ${SEED} and ${REP} must expand in the array task; every other argument is quoted literally
    runner = " ".join(f'"{a}"' if "${" in a else shlex.quote(a) for a in [*argv, "--run-id", run_id])
    if s.container:  # the container's own python and horovodrun
        gpu = " --nv" if s.gpus_per_task else ""
        prefix = f"apptainer exec{gpu} {shlex.quote(s.container)} "
        python, horovodrun = prefix + "python", prefix + "horovodrun"
    else:
        local = python_of(s, first.framework)
        python, horovodrun = shlex.quote(local), shlex.quote(launch.horovodrun_for(local))
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shlex.quote(('hs-' + spec.name + '-' + first.point)[:120])}",
        f"#SBATCH --partition={s.partition}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={per_node}",
        f"#SBATCH --cpus-per-task={s.cpus_per_task}",
        f"#SBATCH --time={s.time}",
        f"#SBATCH --output={out}/%x-%A_%a.slurm.out"
        if array
        else f"#SBATCH --output={out}/{first.run_id}.slurm.out",
    ]
    if s.gpus_per_task:
        lines.append(f"#SBATCH --gpus-per-task={s.gpus_per_task}")
    if s.account:
        lines.append(f"#SBATCH --account={s.account}")
    if s.qos:
        lines.append(f"#SBATCH --qos={s.qos}")
    if array:
        throttle = f"%{s.max_in_flight}" if s.max_in_flight else ""
        reps = sorted(p.seed - spec.seed for p in group)
        lines.append(f"#SBATCH --array={','.join(map(str, reps))}{throttle}")
    lines += [f"#SBATCH {opt}" for opt in s.sbatch]
    lines += [
        "",
        "set -u",
        "# generated by honestscale campaign submit: one srun starts every rank of the run",
    ]
    lines += [f"module load {shlex.quote(m)}" for m in s.modules]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(s.env.items())]
    lines.append(f"export OMP_NUM_THREADS={s.cpus_per_task}")
    if array:
        lines += ["REP=${SLURM_ARRAY_TASK_ID}", f"SEED=$(( {spec.seed} + REP ))"]
    if first.framework in launch.HOROVOD and s.mpi != "horovodrun":
        # Horovod built with MPI: Slurm starts every rank, its PMI plugin wires up Open MPI
        lines.append(f"srun --mpi={s.mpi} --kill-on-bad-exit=1 {python} -m {module} {runner}")
    elif first.framework in launch.HOROVOD:
        # Horovod built with Gloo: horovodrun starts the ranks on the allocated nodes (over ssh beyond the first)
        lines.append(
            'HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/$/:${SLURM_NTASKS_PER_NODE%%(*}/" | paste -sd,)'
        )
        lines.append(f'{horovodrun} -np "$SLURM_NTASKS" -H "$HOSTS" --gloo {python} -m {module} {runner}')
    else:
        lines.append(f"srun --kill-on-bad-exit=1 {python} -m {module} {runner}")
    return "\n".join(lines) + "\n"


def command(cmd: list[str], what: str) -> str:
    if shutil.which(cmd[0]) is None:
        raise SlurmError(
            f"{cmd[0]} not found: no Slurm client here",
            "run on a login node, or start one: scripts/slurm-local start",
        )
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise SlurmError(
            f"{what} failed: {result.stderr.strip() or result.stdout.strip()}", "check the [slurm] settings"
        )
    return result.stdout


def submit(con: Connection, spec: _campaign.Spec, jobs: Iterable[Job]) -> list[tuple[str, str]]:
    """sbatch every job; record each run's job id and script; return (run_id, job_id)."""
    out: list[tuple[str, str]] = []
    folder = spec.out.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        path = folder / f"{job.plans[0].run_id}.sbatch"
        path.write_text(job.script, encoding="utf-8")
        job_id = command(["sbatch", "--parsable", str(path)], f"sbatch {path}").strip().split(";")[0]
        for p in job.plans:
            task = f"{job_id}_{p.seed - spec.seed}" if job.array else job_id
            campaigns.record_job(con, spec.name, p.run_id, task, p.point, job.script)
            out.append((p.run_id, task))
    return out


@dataclass
class JobState:
    run_id: str
    job_id: str
    state: str
    reason: str | None
    exit_code: str | None
    source: str  # squeue | scontrol | events | store


def poll(con: Connection, campaign: str, out: Path) -> list[JobState]:
    """One squeue call for every job of the campaign; scontrol for the finished ones; then the runs' events."""
    jobs = campaigns.latest_jobs(con, campaign)
    if not jobs:
        return []
    live: dict[str, tuple[str, str]] = {}
    if shutil.which("squeue"):
        ids = sorted({j.split("_")[0] for _, j, _ in jobs})
        text = command(["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(ids)], "squeue") if ids else ""
        for line in text.splitlines():
            job, state, reason = [*line.split("|"), "", ""][:3]
            live[job.strip()] = (state.strip(), reason.strip())
    remembered: dict[str, tuple[str, str, str]] = {}
    missing = [j for _, j, _ in jobs if j not in live]
    if missing and shutil.which("scontrol"):
        text = subprocess.run(
            ["scontrol", "-o", "show", "job"], capture_output=True, text=True, timeout=60
        ).stdout
        for line in text.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            key = f"{f['ArrayJobId']}_{f['ArrayTaskId']}" if f.get("ArrayTaskId") else f.get("JobId", "")
            remembered[key] = (f.get("JobState", ""), f.get("Reason", ""), f.get("ExitCode", ""))
    states = []
    for run_id, job_id, last in jobs:
        if job_id in live:
            state, reason = live[job_id]
            states.append(JobState(run_id, job_id, state, reason, None, "squeue"))
        elif job_id in remembered:
            state, reason, code = remembered[job_id]
            states.append(JobState(run_id, job_id, state, reason, code, "scontrol"))
        else:
            stop = _run_stop(out, run_id)
            state = {"success": "COMPLETED", "timeout": "TIMEOUT", "cancelled": "CANCELLED"}.get(
                stop or "", "FAILED" if stop else (last or "UNKNOWN")
            )
            states.append(JobState(run_id, job_id, state, None, None, "events" if stop else "store"))
    for s in states:
        campaigns.update_job(con, campaign, s.run_id, s.job_id, s.state, s.reason, s.exit_code)
    return states


def tally(states: list[JobState]) -> str:
    """``2 completed, 1 running``: how many jobs are in each state."""
    counts = Counter(s.state for s in states)
    return ", ".join(f"{n} {state.lower()}" for state, n in sorted(counts.items()))


def _run_stop(out: Path, run_id: str) -> str | None:
    f = out / run_id / "events-rank0.jsonl"
    try:
        lines = f.read_bytes()[-8192:].splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("kind") == "run_stop":
            return str(e.get("status"))
    return None


def record_unfinished(
    spec: _campaign.Spec, states: list[JobState], plans: dict[str, _campaign.RunPlan]
) -> list[str]:
    """For jobs Slurm ended without a run_stop from the runner (killed hard, never started), write one.

    The events go to rank 0's file with the contract's writer, continuing its seq: a run that never
    started gets a run_start from its plan first. Nothing is dropped; the reason names the Slurm job.
    """
    from honestscale.events import EventWriter

    written = []
    for s in states:
        if s.state not in TERMINAL or _run_stop(spec.out, s.run_id) is not None:
            continue
        status = STATUS_OF.get(s.state, "failed")
        plan = plans.get(s.run_id)
        path = spec.out / s.run_id / "events-rank0.jsonl"
        with EventWriter(spec.out, s.run_id, 0) as w:
            if not path.exists() or path.stat().st_size == 0 or w.next_seq == 0:
                w.run_start(campaign=spec.name, name=f"{spec.name}-{plan.point}" if plan else None,
                            purpose=plan.purpose if plan else None, framework=plan.framework if plan else "unknown",
                            world_size=plan.workers if plan else 1, launcher="slurm", slurm_job_id=s.job_id,
                            tuning_study=plan.tuning_study if plan else None,
                            tuning_trial=plan.tuning_trial if plan else None)  # fmt: skip
                why = "never started"
            else:
                why = "killed before the runner could write its run_stop"
            w.run_stop(
                status,
                f"Slurm job {s.job_id} ended {s.state} ({why}); recorded by honestscale campaign collect",
            )
        written.append(s.run_id)
    return written

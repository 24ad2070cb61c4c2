"""Campaigns on a real one-node Slurm (scripts/slurm-local): submitted, tracked, collected, killed.

The session fixture starts slurmctld, slurmd and munged in a folder of their own and stops them after.
In CI (CI=true) a missing Slurm is a failure, not a skip: .ci/run installs slurm-wlm and munge.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, cli, framework_python, hs, query
from tests.tools import require

# a model that waits 50 ms a step: a job that idles to its limit
IDLE = REPO / "tests" / "data" / "models" / "idle.py"
SPEC = """
[campaign]
name = "{name}"
out = "runs"
repetitions = {reps}
scaling = "strong"

[args]
model = "mlp"
dataset = "digits"
epochs = {epochs}
sample_interval = 0.5

[grid]
workers = {workers}

[slurm]
partition = "local"
time = "{time}"
cpus_per_task = 1
{extra}
"""


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The local cluster (scripts/slurm-local), on fixed ports: one at a time on this machine. The tests run in
    parallel file by file (pytest-xdist ``--dist loadfile``), so every test that needs it stays in this file."""
    require(
        shutil.which("slurmctld") and shutil.which("munged"),
        "slurm-wlm and munge",
        "apt-get install slurm-wlm munge",
    )
    folder = tmp_path_factory.mktemp("slurm")
    start = subprocess.run([str(REPO / "scripts" / "slurm-local"), "start", str(folder)], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert start.returncode == 0, start.stderr
    env = {"SLURM_CONF": str(folder / "slurm.conf")}
    yield env
    subprocess.run(
        [str(REPO / "scripts" / "slurm-local"), "stop", str(folder)], capture_output=True, timeout=60
    )


def _plans(spec: Path) -> list[Any]:
    """The runs a spec plans, as `campaign submit` names them."""
    from honestscale.campaign.shared import runner_options
    from honestscale.campaign.spec import load

    return load(spec, runner_options).plans()


def _spec(tmp: Path, name: str, *, workers: str = "[1]", reps: int = 1, epochs: int = 3, time_limit: str = "00:10:00",
          extra: str = "") -> Path:  # fmt: skip
    folder = tmp / name
    folder.mkdir()
    path = folder / "spec.toml"
    path.write_text(
        SPEC.format(name=name, workers=workers, reps=reps, epochs=epochs, time=time_limit, extra=extra)
    )
    return path


def _until(cond: object, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return
        time.sleep(2)
    raise AssertionError(f"timed out waiting for {what}")


def _states(spec: Path, store: Path, env: dict[str, str]) -> str:
    """What `campaign status` prints, in this process: the tests poll it every 2 s, and a fresh process a poll cost
    a second of CPU that the jobs it waits for needed."""
    return cli("campaign", "status", spec, "--store", store, env=env).stdout


def test_slurm_bad_specs_are_refused_before_submission(tmp_path: Path, slurm: dict[str, str]) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    cases = [
        ("unknown", "nodez = 2", "unknown key 'nodez' in [slurm]"),
        ("shape", "tasks_per_node = 1\nnodes = 1", "2 workers do not fit 1 node(s) x 1 task(s) per node"),
        ("python", f'python = "{bare / "bin" / "python"}"', "needs torch, sklearn, not installed"),
        ("mpi", 'mpi = "pmi3"', "[slurm] mpi = 'pmi3'"),
    ]
    for name, extra, message in cases:
        spec = _spec(tmp_path, name, workers="[2]", extra=extra)
        store = tmp_path / f"{name}.duckdb"
        result = hs("campaign", "submit", spec, "--store", store, env=slurm)
        assert result.returncode == 2 and message in result.stderr, (name, result.stderr)
        assert not list(spec.parent.glob("runs/*.sbatch")) and not store.exists()
    spec = _spec(tmp_path, "nopart", extra="")
    spec.write_text(spec.read_text().replace('partition = "local"', ""))
    result = hs("campaign", "submit", spec, "--store", tmp_path / "np.duckdb", env=slurm)
    assert result.returncode == 2 and "[slurm] has no partition" in result.stderr
    spec = _spec(tmp_path, "wrongpart")
    spec.write_text(spec.read_text().replace('partition = "local"', 'partition = "gpu-a100"'))
    result = hs("campaign", "submit", spec, "--store", tmp_path / "wp.duckdb", env=slurm)
    assert result.returncode == 2 and "partition 'gpu-a100' does not exist here" in result.stderr


def test_slurm_dry_run_prints_arrays_with_one_srun_per_run(tmp_path: Path, slurm: dict[str, str]) -> None:
    spec = _spec(
        tmp_path,
        "dry",
        workers="[1, 2]",
        reps=3,
        extra='modules = ["cuda/12.4"]\n[slurm.env]\nNCCL_DEBUG = "WARN"',
    )
    result = hs("campaign", "submit", spec, "--store", tmp_path / "s.duckdb", "--dry-run", env=slurm)
    assert result.returncode == 0, result.stderr
    scripts = result.stdout
    assert scripts.count("#!/bin/bash") == 2 and scripts.count("#SBATCH --array=0,1,2") == 2
    assert "#SBATCH --ntasks-per-node=2" in scripts and "module load cuda/12.4" in scripts
    assert "export NCCL_DEBUG=WARN" in scripts and scripts.count("srun --kill-on-bad-exit=1") == 2
    assert (
        re.search(r'--run-id "dry-workers=2-[0-9a-f]{8}-r\$\{REP\}"', scripts)
        and '--seed "${SEED}"' in scripts
    )
    assert not (tmp_path / "s.duckdb").exists()


def test_slurm_campaign_is_submitted_tracked_collected_linted_and_reported(
    tmp_path: Path, slurm: dict[str, str]
) -> None:
    spec = _spec(tmp_path, "slurmcamp", workers="[1, 2]", reps=3)
    store = tmp_path / "s.duckdb"
    sub = hs("campaign", "submit", spec, "--store", store, env=slurm)
    assert sub.returncode == 0, sub.stderr
    assert query(store, "SELECT count(*), count(DISTINCT split_part(job_id, '_', 1)) FROM slurm_jobs") == [
        (6, 2)
    ]
    _until(lambda: _states(spec, store, slurm).strip().endswith("6 completed"), 300, "the 6 runs")
    collected = hs("campaign", "collect", spec, "--store", store, env=slurm)
    assert collected.returncode == 0, collected.stderr
    runs = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert len(runs) == 6 and {r["status"] for r in runs} == {"success"}
    assert sorted(r["world_size"] for r in runs) == [1, 1, 1, 2, 2, 2]
    assert {r["n_accelerators"] for r in runs} == {0}  # CPU runs: no accelerator
    assert {r["launcher"] for r in runs} == {"slurm"} and all(
        "_" in str(r["slurm_job_id"]) for r in runs
    )  # 123_4
    table = cli("runs", "--store", store).stdout
    assert "slurm job" in table and runs[0]["slurm_job_id"] in table
    scripts = query(store, "SELECT DISTINCT script FROM slurm_jobs")
    assert len(scripts) == 2 and all("srun" in str(s[0]) for s in scripts)
    lint = cli("lint", "--store", store, "--campaign", "slurmcamp")
    assert lint.returncode in (0, 1) and "Traceback" not in lint.stderr and "HS202" in lint.stdout
    report = cli("report", "--store", store, "--campaign", "slurmcamp", "-o", tmp_path / "r.pdf")
    assert report.returncode == 0 and (tmp_path / "r.pdf").stat().st_size > 10_000
    _accounting_joins_the_runs(tmp_path, store, runs, slurm)


def _accounting_joins_the_runs(
    tmp_path: Path, store: Path, runs: list[dict[str, Any]], env: dict[str, str]
) -> None:
    """The cluster's own sacct output (slurmdbd on MariaDB) lands as energy records joined to the runs by their
    array task's job id; this VM's energy plugin reads nothing, so each run's energy is "not measured", never 0 J."""
    if shutil.which("slurmdbd") is None:  # the rest of the Slurm test goes on without accounting
        require(False, "slurmdbd and mariadb-server", "apt-get install slurmdbd mariadb-server")
    jobs = {str(r["slurm_job_id"]) for r in runs}
    fields = "JobID,JobName,Start,End,ElapsedRaw,NNodes,NodeList,AllocTRES,ConsumedEnergyRaw,State,ExitCode"
    sacct = ["sacct", "-P", "--noconvert", "-a", "-X", "-S", "now-1days", f"--format={fields}"]
    got: list[str] = []

    def recorded() -> bool:
        out = subprocess.run(sacct, env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
        got[:] = [
            line for line in out.stdout.splitlines() if line.split("|")[0] in jobs and "|COMPLETED|" in line
        ]
        return len(got) == len(jobs)

    _until(recorded, 60, "slurmdbd to hold every job")
    out = subprocess.run(
        sacct, env={**os.environ, **env}, capture_output=True, text=True, timeout=30, check=True
    )
    (tmp_path / "sacct.txt").write_text(out.stdout)
    ingested = hs("ingest", tmp_path / "sacct.txt", "--store", store, "-v")
    assert (
        ingested.returncode == 0
        and "read as Slurm accounting (sacct -P)" in ingested.stderr + ingested.stdout
    )
    for r in runs:
        shown = json.loads(cli("show", r["run_id"], "--store", store, "-f", "json").stdout)["energy_to_train"]
        assert shown["source"] == "not recorded" and "ConsumedEnergyRaw" in shown["why"], shown


def test_slurm_timeout_cancel_and_never_started_are_recorded(tmp_path: Path, slurm: dict[str, str]) -> None:
    late = _spec(tmp_path, "late", epochs=1_000_000, time_limit="00:01:00")
    late.write_text(late.read_text().replace('model = "mlp"', f'model = "{IDLE}:build"'))  # sleeps, not spins
    killed = _spec(tmp_path, "killed", epochs=1_000_000)
    held = _spec(tmp_path, "held", extra='sbatch = ["--hold"]')
    stores = {s: tmp_path / f"{s.parent.name}.duckdb" for s in (late, killed, held)}
    for spec, store in stores.items():
        assert hs("campaign", "submit", spec, "--store", store, env=slurm).returncode == 0
    (rank0,) = [killed.parent / "runs" / f"{p.series}-r0" / "events-rank0.jsonl" for p in _plans(killed)]
    _until(lambda: rank0.exists() and rank0.read_text().count('"step"') > 20, 120, "the run to be training")
    job = query(stores[killed], "SELECT job_id FROM slurm_jobs")[0][0]
    held_job = query(stores[held], "SELECT job_id FROM slurm_jobs")[0][0]
    subprocess.run(["scancel", str(job), str(held_job)], env={**os.environ, **slurm}, check=True)
    _until(lambda: "1 timeout" in _states(late, stores[late], slurm), 240, "the time limit")
    _until(lambda: "1 cancelled" in _states(killed, stores[killed], slurm), 60, "the cancellation")
    for spec, store in stores.items():
        assert hs("campaign", "collect", spec, "--store", store, env=slurm).returncode == 0
    (t,) = json.loads(cli("runs", "--store", stores[late], "-f", "json").stdout)
    assert t["status"] == "timeout" and "time limit" in t["reason"]
    assert query(stores[late], "SELECT count(*) FROM steps")[0][0] > 20  # the partial events are kept
    (c,) = json.loads(cli("runs", "--store", stores[killed], "-f", "json").stdout)
    assert c["status"] == "cancelled" and "cancelled" in c["reason"]
    (h,) = json.loads(cli("runs", "--store", stores[held], "-f", "json").stdout)
    assert h["status"] == "cancelled" and "never started" in h["reason"]


def test_slurm_horovod_ranks_are_started_by_srun_pmix(tmp_path: Path, slurm: dict[str, str]) -> None:
    """Horovod built with Open MPI: each rank is a Slurm task of `srun --mpi=pmix`, wired up by Slurm's PMIx."""
    framework_python("horovod-tf")
    framework_python("horovod-torch")
    spec = _spec(tmp_path, "hvdpmix", workers="[2]", epochs=2)
    text = spec.read_text().replace("[grid]", '[grid]\nframework = ["horovod-torch", "horovod-tf"]')
    spec.write_text(text.replace("sample_interval = 0.5", "sample_interval = 0.5\nbatch_size = 64"))
    dry = hs("campaign", "submit", spec, "--store", tmp_path / "dry.duckdb", "--dry-run", env=slurm)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("srun --mpi=pmix --kill-on-bad-exit=1") == 2 and "horovodrun" not in dry.stdout
    store = tmp_path / "s.duckdb"
    sub = hs("campaign", "submit", spec, "--store", store, env=slurm)
    assert sub.returncode == 0, sub.stderr
    _until(lambda: not re.search(r"pending|running", _states(spec, store, slurm).strip().splitlines()[-1]),
           400, "the 2 Horovod runs to end")  # fmt: skip
    outs = "".join(p.read_text() for p in spec.parent.glob("runs/*.slurm.out"))
    # both ended cleanly: a rank that exits without MPI_Finalize makes PMIx abort the step (rank 0 killed)
    assert _states(spec, store, slurm).strip().endswith("2 completed"), outs[-3000:]
    assert hs("campaign", "collect", spec, "--store", store, env=slurm).returncode == 0
    runs = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert sorted(r["framework"] for r in runs) == ["horovod-tf", "horovod-torch"], outs[-3000:]
    for r in runs:
        assert r["status"] == "success" and r["world_size"] == 2, (r, outs[-3000:])
        assert r["n_accelerators"] == 0, r  # CPU runs: no accelerator
        shown = json.loads(cli("show", r["run_id"], "--store", store, "-f", "json").stdout)
        # Slurm started the ranks and Horovod exchanged gradients over MPI, not Gloo
        assert shown["launcher"] == "slurm" and shown["backend"] == "mpi", shown
        assert [s["rank"] for s in shown["step_breakdown"]] == [0, 1]
        assert shown["final_accuracy"]["value"] > 0.5


def test_probe_on_slurm_submits_waits_collects_and_advises(tmp_path: Path, slurm: dict[str, str]) -> None:
    model = f"{REPO / 'examples' / 'byo' / 'mycnn.py'}:build"
    lonely = hs(
        "probe", "--model", model, "--partition", "local", "--store", tmp_path / "x.duckdb", env=slurm
    )
    assert lonely.returncode == 2 and "--partition only apply to Slurm" in lonely.stderr
    store = tmp_path / "s.duckdb"
    result = hs("probe", "--model", model, "--workers", "1,2", "--framework", "torch", "--samples", "2000",
                "--repetitions", "2", "--slurm", "--time", "00:10:00", "--poll", "2", "--out", tmp_path / "probe",
                "--store", store, env=slurm, timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    spec = (tmp_path / "probe" / "probe-mycnn-build.toml").read_text()
    assert '[slurm]\npartition = "local"' in spec  # Slurm's default partition, from sinfo
    assert 'sbatch = ["--exclusive"]' in spec
    # one job array per worker count, a task per repetition, every rank started by srun
    assert query(store, "SELECT count(*), count(DISTINCT split_part(job_id, '_', 1)) FROM slurm_jobs") == [
        (4, 2)
    ]
    assert all(
        "srun --kill-on-bad-exit=1" in str(s[0]) for s in query(store, "SELECT script FROM slurm_jobs")
    )
    rows = query(store, "SELECT world_size, status, launcher, model, slurm_job_id FROM runs ORDER BY 1")
    assert [r[:4] for r in rows] == [(w, "success", "slurm", "mycnn:build") for w in (1, 1, 2, 2)]
    assert all("_" in str(r[4]) for r in rows)
    # each run had the node to itself (the runners read it back from scontrol), so HS208 never says the allocation
    # was shared; on a loaded machine (a shared CI host) it may still fail on the host's load (at the start, or the
    # CPU wait its steps measured), and must say so
    for events in (tmp_path / "probe").glob("*/events-rank0.jsonl"):
        start = json.loads(events.read_text().splitlines()[0])
        assert start["kind"] == "run_start" and start["isolation"]["exclusive"] is True, events
    lint = json.loads(cli("lint", "--store", store, "--campaign", "probe-mycnn-build", "-f", "json").stdout)
    shared = [f for f in lint if f["code"] == "HS208"]
    assert lint and all(
        "not --exclusive" not in f["message"]
        and ("host load" in f["message"] or "Linux's CPU pressure" in f["message"])
        for f in shared
    ), shared
    verdict = result.stdout[result.stdout.index("verdict") :]
    for workers in (1, 2):
        assert re.search(rf"mycnn:build / torch at {workers} worker\(s\): .+ bound \(\d+ %\)", verdict), (
            verdict
        )


def test_slurm_until_ci_submits_more_repetitions_as_results_come_in(
    tmp_path: Path, slurm: dict[str, str]
) -> None:
    spec = _spec(tmp_path, "untilci", workers="[1]", reps=1, epochs=2)
    store = tmp_path / "s.duckdb"
    sub = hs("campaign", "submit", spec, "--store", store, "--until-ci", "0.01%", "--max-repetitions", "3",
             "--follow", "--interval", "2", env=slurm, timeout=600)  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    assert sub.stderr.count("submitted 1 job(s)") == 3, sub.stderr  # the first run, then one round per result
    assert "more repetitions" in sub.stderr
    runs = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert sorted(re.sub("-[0-9a-f]{8}-", "-", r["run_id"]) for r in runs) == [
        f"untilci-workers=1-r{n}" for n in range(3)
    ]
    assert {r["status"] for r in runs} == {"success"}
    assert query(store, "SELECT count(DISTINCT run_id) FROM slurm_jobs") == [(3,)]
    assert "untilci workers=1: 3 runs, stopped by the cap of 3" in sub.stderr

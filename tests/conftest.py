"""Shared fixtures: the real MLPerf logs, a fresh store, and the CLI run as a user runs it."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import duckdb
import pytest

from tests.postgres import Postgres, cluster
from tests.tools import not_in_ci_skipped, require

# Tests press Ctrl-C (SIGINT) in the commands they start. pytest started in the background by a script (`pytest &`,
# no job control) starts with SIGINT ignored, so does every command it starts, and Python keeps an ignore it
# inherits (as it should): the commands would never hear the press (seen: the four `ingest --watch` tests timed out
# in a suite started so). A background pytest cannot get Ctrl-C from a terminal; taking the ignore back changes
# nothing else. Each xdist worker imports this file.
if (
    signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    and threading.current_thread() is threading.main_thread()
):
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "digits-ddp"


def mlperf_root() -> Path:
    return Path(
        os.environ.get("HONESTSCALE_MLPERF_DATA", REPO.parent / "shared" / "data" / "mlperf-training-v0.7")
    )


@pytest.fixture(scope="session")
def mlperf() -> Path:
    root = mlperf_root()
    require(
        (root / "DellEMC").is_dir(),
        f"the MLPerf v0.7 logs at {root}",
        "../shared beside the repository, or set HONESTSCALE_MLPERF_DATA",
    )
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


COMPARE_RUNS = REPO / "examples" / "compare" / "runs"


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL on loopback (tests/postgres.py), for the DuckLake store's catalog."""
    yield from cluster()


@pytest.fixture(scope="session")
def compare_store(tmp_path_factory: pytest.TempPathFactory, mlperf: Path) -> Path:
    """The compare example's real runner events (four campaigns of the digits MLP, 6 runs each, CPU only) and the
    MLPerf v0.7 logs, ingested into one store; read only by its users."""
    path = tmp_path_factory.mktemp("compare") / "store.duckdb"
    for source in (COMPARE_RUNS, mlperf):
        got = cli("ingest", source, "--store", path)
        assert got.returncode == 0, got.stderr
    return path


def _user_env(env: dict[str, str] | None) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"}
    full_env.update(COLUMNS="200", **(env or {}))
    return full_env


def hs(
    *args: str | os.PathLike[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the honestscale command in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "honestscale", *map(str, args)],
        capture_output=True,
        text=True,
        env=_user_env(env),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def cli(
    *args: str | os.PathLike[str], env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the honestscale command in this process, through ``main()`` as the installed script runs it (its error
    messages, fixes and exit codes), stdin empty and the environment a user's (as ``hs``; None unsets a variable):
    for the tests whose subject is what a command does, not its process. A fresh process costs 0.5-0.7 s of CPU to
    start, a report's several more for its imports; the tests that kill, interrupt or time a command, or train,
    start one (``hs``)."""
    from typer.testing import CliRunner

    from honestscale.cli import main

    argv = ["honestscale", *map(str, args)]
    saved_env, saved_argv = dict(os.environ), sys.argv
    overrides: dict[str, str | None] = {"HONESTSCALE_STORE": None, "COLUMNS": "200", **(env or {})}
    try:
        with CliRunner().isolation(env=overrides) as (stdout, stderr, _):
            sys.argv = argv
            try:
                main()
                code = 0
            except SystemExit as done:
                if isinstance(done.code, int) or done.code is None:
                    code = done.code or 0
                else:
                    print(done.code, file=sys.stderr)
                    code = 1
            except Exception:  # what the installed script would print as its traceback
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            return subprocess.CompletedProcess(
                argv, code, stdout.getvalue().decode(), stderr.getvalue().decode()
            )
    finally:  # the root callback's --store sets the environment for the command; it ends with it
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)


def hs_start(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the honestscale command in a fresh process and return at once (stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "honestscale", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_user_env(env),
        stdin=subprocess.DEVNULL,
    )


class HeldStore:
    """Another process holding the store's write lock until the test releases it: what a test does while the
    store is held is ordered by events it sees (a line printed), never by how long a sleep lasts."""

    def __init__(self, store: Path) -> None:
        # The holder ends when its stdin closes (release, or the test process gone), or after 10 minutes at most.
        script = (
            "import duckdb,signal,sys; signal.alarm(600); "
            f"c=duckdb.connect({str(store)!r}); print('locked', flush=True); sys.stdin.read(); c.close()"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def holding(self) -> bool:
        return self.proc.poll() is None

    def release(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        assert self.proc.wait(60) == 0


@contextlib.contextmanager
def held_store(store: Path) -> Iterator[HeldStore]:
    """The store's write lock held by another process for the ``with`` block, or until ``release()``."""
    held = HeldStore(store)
    try:
        yield held
    finally:
        held.release()


class Lines:
    """A pipe read line by line on a thread, so a test can wait for a line while the process goes on."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.append(line)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in "".join(self._lines):
            assert time.monotonic() < deadline, f"{text!r} not printed in {timeout} s; printed: {self._lines}"
            time.sleep(0.05)

    def text(self) -> str:
        """Everything read, once the stream has ended."""
        self._thread.join(60)
        return "".join(self._lines)


# Columns that record when something happened, not what: left out when comparing stores.
_VOLATILE = {
    "first_ingested_at",
    "last_ingested_at",
    "quarantined_at",
    "ingested_at",
    "seconds",
    "mtime_ns",
    "file_id",
}
DATA_TABLES = ("runs", "events", "steps", "epochs", "evals", "system_samples", "quarantine", "ingested_files")


def snapshot(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every data table, sorted, without timestamps: equal snapshots mean equal stores."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        out = {}
        for table in DATA_TABLES:
            cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in _VOLATILE]
            rows = con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            out[table] = sorted(rows, key=repr)
        return out
    finally:
        con.close()


def counts(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in DATA_TABLES}
    finally:
        con.close()


def query(path: Path, sql: str, params: list[object] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def store_at_version(path: Path, version: int) -> duckdb.DuckDBPyConnection:
    """A store as honestscale left it at schema ``version`` (its first migrations, their version rows), open for the
    test to put rows in as that version held them; the caller closes it."""
    from honestscale.store import migrations

    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
    )
    for mig in migrations()[:version]:
        con.execute(mig.sql)
        con.execute("INSERT INTO schema_version VALUES (?, ?, current_timestamp)", [mig.version, mig.name])
    return con


def runs_by_file(store: Path) -> dict[str, dict[str, Any]]:
    """The store's runs by their source file; MLPerf result files hold one run each."""
    with duckdb.connect(str(store), read_only=True) as con:
        cur = con.execute("SELECT * FROM runs")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_file.setdefault(r["source_file"], []).append(r)
    assert all(len(rs) == 1 for rs in by_file.values()), "one run per result file"
    return {k: v[0] for k, v in by_file.items()}


# How each MLPerf round's logs spell run_stop's status, and honestscale's name for it (None: no run_stop).
MLPERF_STATUS = {
    "success": "success",
    "aborted": "aborted",
    "abort": "aborted",
    "fail": "failed",
    None: "incomplete",
}


def assert_run_as_reference(run: dict[str, Any], ref: dict[str, Any], where: str) -> None:
    """A stored MLPerf run against mlperf-logging's reading of its file: status, time, batch, accelerators."""
    assert run["status"] == MLPERF_STATUS[ref["status"]], where
    if ref["seconds"] is None:
        assert run["time_to_train_s"] is None, where
    else:
        assert run["time_to_train_s"] == pytest.approx(ref["seconds"], abs=1e-3), where
    assert run["global_batch_size"] == ref["gbs"], where
    assert (run["n_nodes"] or 0) * (run["accelerators_per_node"] or 0) == ref["accelerators"], where


def submission_id(folder: Path) -> str:
    """The id honestscale gives the MLPerf submission in ``<round>/<org>/results/<system>/<benchmark>``."""
    parts = folder.parts
    i = parts.index("results")
    return "mlperf:" + "/".join((*parts[i - 2 : i], *parts[i + 1 :]))


def reference_olympic_minutes(
    folder: Path, reference: Callable[[Path], dict[str, Any]], drop: int
) -> float | None:
    """mlperf-logging's olympic average of a submission over the runs its reader sees converge (status
    success), those that did not counted as dropped; None when more did not converge than ``drop``."""
    summarizer = importlib.import_module("mlperf_logging.result_summarizer.result_summarizer")

    scores, dropped = [], 0
    for path in sorted(folder.glob("result_*.txt")):
        ref = reference(path)
        if ref["status"] == "success" and ref["seconds"] is not None:
            scores.append(ref["seconds"] / 60)
        else:
            dropped += 1
    if dropped > drop:
        return None
    got = summarizer._compute_olympic_average(scores, dropped, drop)
    return None if got is None else float(got)


# The environment each framework runs in, as .ci/run names its builds
_BUILDS = {"tensorflow": "tf", "mxnet": "mx", "horovod-torch": "hvd", "horovod-tf": "hvd"}


def _wait_for_build(framework: str, building: Path, limit_s: float = 1800.0) -> None:
    """.ci/run builds the framework environments beside the tests: wait until this one's build has ended (its
    NAME.ok or NAME.failed), failing with the build's log if it failed or took past ``limit_s``."""
    name = _BUILDS.get(framework)
    if name is None:
        return
    waited = time.monotonic()
    while not (building / f"{name}.ok").exists():
        log = building / f"{name}.log"
        if (building / f"{name}.failed").exists() or time.monotonic() - waited > limit_s:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
            pytest.fail(f"the {name} environment did not build ({log}):\n{tail}", pytrace=False)
        time.sleep(2)


def framework_python(framework: str) -> str:
    """The framework's environment (built by .ci/run, which may still be building it: then wait); in CI a missing
    one fails the test, elsewhere skips it."""
    from honestscale.campaign import launch

    if building := os.environ.get("HONESTSCALE_ENVS_BUILDING"):
        _wait_for_build(framework, Path(building))
    try:
        python = launch.python_for(framework)
        launch.check_installed(framework, python)
    except launch.LaunchError as exc:
        require(False, f"the {framework} environment", str(exc))
    return python


def two_worker_run(tmp_path: Path, store: Path, framework: str, *extra: str) -> tuple[dict[str, Any], Path]:
    """``honestscale run --framework F --workers 2 --model mlp --dataset digits --epochs 3``, ingested: the run
    as ``honestscale show`` gives it, and the run's folder."""
    import json

    out = tmp_path / "runs"
    result = hs("run", "--framework", framework, "--workers", "2", "--model", "mlp", "--dataset", "digits",
                "--epochs", "3", "--out", out, "--run-id", f"{framework}-2w", "--ingest", "--store", store, *extra,
                timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert run["status"] == "success" and run["framework"] == framework and run["world_size"] == 2
    assert run["n_accelerators"] == 0  # on CPU: workers are processes, no accelerator
    assert run["framework_version"] and run["final_accuracy"]["split"] == "test"
    assert run["final_accuracy"]["value"] > 0.8, run
    shown = json.loads(cli("show", run["run_id"], "--store", store, "-f", "json").stdout)
    assert {e["split"] for e in shown["evals"]} == {"train", "validation", "test"}
    assert [s["rank"] for s in shown["step_breakdown"]] == [0, 1]
    assert (shown["train_size"], shown["validation_size"], shown["test_size"]) == (1257, 270, 270)
    # the phases measured sum to the step (a phase the runner cannot see is absent: Keras' comm and optimizer)
    parts = query(
        store,
        "SELECT t_data + t_compute + coalesce(t_comm, 0) + coalesce(t_optimizer, 0), t_total FROM steps",
    )
    assert parts and all(abs(p - t) <= 0.05 * t + 1e-6 for p, t in parts)
    # every rank says how many threads it ran (as its framework reports them), on which CPUs, and what the
    # launcher set: the launcher splits this machine's CPUs between the 2 workers
    for events in sorted((out / f"{framework}-2w").glob("events-rank*.jsonl")):
        start = json.loads(events.read_text().splitlines()[0])
        assert start["kind"] == "run_start" and start["schema"] >= 2, events
        assert isinstance(start["intra_op_threads"], int) and isinstance(start["inter_op_threads"], int), (
            start
        )
        assert start["cpus_allowed"] == len(start["cpu_affinity"]) >= 1
        assert "OMP_NUM_THREADS" in start["launch_env"], start["launch_env"]
    return shown, out / f"{framework}-2w"


# The suite's skips, counted (under CI=true none may happen: every tool is installed there, tests/tools.py)
_SKIPPED: list[str] = []


def _skipped(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append(f"{report.nodeid}: {why.removeprefix('Skipped: ')}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _skipped(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _skipped(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if said := not_in_ci_skipped(_SKIPPED):
        terminalreporter.write_line(said, red=True, bold=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput") and not_in_ci_skipped(_SKIPPED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

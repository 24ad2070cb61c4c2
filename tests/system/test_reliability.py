"""Faults end in a clear message and lose nothing (issue 18): a full disk, kill -9 at random points, commands
side by side on one store, files with nothing in them. After any of them, ingesting again gives the same store as
one clean ingest.

The full-disk tests mount a small tmpfs (root with CAP_SYS_ADMIN); where mounting is not allowed they are skipped
with the reason, never in CI.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from honestscale import events as ev
from honestscale.collector._landing import IngestError
from honestscale.collector._sources import discover
from honestscale.collector.ingest import BATCH_ENV, Ingester
from honestscale.store import StoreUnwritable, as_store_error, open_store
from tests.conftest import Lines, counts, held_store, hs, query, snapshot
from tests.runs import big_campaign, wait_for, write_run
from tests.tools import require

FILES, STEPS = 24, 6000  # the big campaign: 24 files of 6,002 events, a 7 MB store
SMALL_BATCHES = {"HONESTSCALE_INGEST_BATCH_MB": "1"}  # about one file per transaction


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big") / "campaign"
    big_campaign(folder, FILES, STEPS)
    return folder


@pytest.fixture(scope="module")
def clean(big: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store one clean ingest of the big campaign makes: what every faulty history must end in."""
    store = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    assert hs("ingest", big, "--store", store, env=SMALL_BATCHES).returncode == 0
    return store


def _whole_files_only(store: Path, why: str) -> None:
    """The store opens, and holds whole files only: every file's 6,002 events or none of them."""
    if not store.exists() or store.stat().st_size == 0:
        return  # never created, or its creation cut short: honestscale starts it again (it holds nothing)
    if query(store, "SELECT count(*) FROM information_schema.tables") == [(0,)]:
        return  # created, its tables not: honestscale sets it up on the next open
    got = counts(store)
    assert got["events"] == got["ingested_files"] * (STEPS + 2), (why, got)


def _no_traceback(*results: subprocess.CompletedProcess[str]) -> None:
    for r in results:
        assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr[-3000:]


def test_files_with_nothing_in_them_land_as_nothing(tmp_path: Path, store: Path) -> None:
    """A new empty file (a runner has opened it, not yet written), one of blank lines, an MLPerf log whose only
    record is broken: nothing to validate, which once failed on the missing staging table (`_acc`)."""
    folder = tmp_path / "ev"
    (folder / "empty").mkdir(parents=True)
    (folder / "empty" / "events-rank0.jsonl").touch()
    (folder / "blank").mkdir()
    (folder / "blank" / "events-rank0.jsonl").write_text("\n\n\n")
    (folder / "mlperf").mkdir()
    (folder / "mlperf" / "result_0.txt").write_text(':::MLLOG {"key": "run_start", "time_ms": \n')
    result = hs("ingest", folder, "--store", store)
    _no_traceback(result)
    assert result.returncode == 3, result.stderr  # the broken MLLOG line is quarantined
    got = counts(store)
    assert got["events"] == 0 and got["ingested_files"] == 3 and got["quarantine"] == 1
    write_run(folder / "empty", "later", world=1)  # the same folder grows: it lands as any other
    assert hs("ingest", folder, "--store", store).returncode == 3
    assert counts(store)["runs"] == 1


def _interrupt(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)


def _watch(folder: Path, store: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"}
    return subprocess.Popen(
        [sys.executable, "-m", "honestscale", "ingest", "--watch", str(folder), "--store", str(store),
         "--interval", "0.2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _live_runs(folder: Path, runs: int, steps: int = 40) -> None:
    """Runs written as a runner writes them: the file opened (empty) first, then lines over time."""
    for r in range(runs):
        with ev.EventWriter(folder, f"live{r}", 0) as w:
            time.sleep(0.3)  # an empty file for the watcher to find
            w.run_start(framework="torch", world_size=1, campaign="live")
            for i in range(steps):
                w.step(step=i, samples=8, t_total=0.01)
                if i % 10 == 0:
                    time.sleep(0.05)
            w.run_stop("success")


def test_watch_beside_ingest_report_and_lint_on_one_store(tmp_path: Path, store: Path) -> None:
    """`ingest --watch` while runs are written, and at the same time a one-shot ingest, a report, lint and runs on
    the same store: each waits for the other, none crashes, and the store ends as one clean ingest of it all."""
    pre, live, other = tmp_path / "pre", tmp_path / "live", tmp_path / "other"
    write_run(pre, "r1")
    write_run(pre, "r2", world=1)
    live.mkdir()
    big_campaign(other, files=8, steps=3000)
    assert hs("ingest", pre, "--store", store).returncode == 0
    watcher = _watch(
        live, store, "--wait", "1"
    )  # shorter than a report holds the store: it must go on waiting
    writer = threading.Thread(target=_live_runs, args=(live, 4))
    writer.start()
    cmd = [sys.executable, "-m", "honestscale"]
    env = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"}
    jobs = {
        "ingest": [*cmd, "ingest", str(other), "--store", str(store), "--wait", "120"],
        "report": [*cmd, "report", "--store", str(store), "-o", str(tmp_path / "r.pdf"), "--wait", "120"],
        "lint": [*cmd, "lint", "--store", str(store), "--wait", "120"],
        "runs": [*cmd, "runs", "--store", str(store), "-f", "json", "--wait", "120"],
    }
    procs = {
        name: subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for name, args in jobs.items()
    }
    done = {name: p.communicate(timeout=300) for name, p in procs.items()}
    writer.join()
    for name, (_out, err) in done.items():
        assert "Traceback" not in err, (name, err[-3000:])
        assert procs[name].returncode in ((0, 1) if name == "lint" else (0,)), (name, err[-3000:])
    once = tmp_path / "once.duckdb"
    assert hs("ingest", pre, other, live, "--store", once).returncode == 0
    wait_for(lambda: _events(store) == counts(once)["events"], timeout=60)
    out, err = _interrupt(watcher)
    assert watcher.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "watch stopped" in out
    assert snapshot(store) == snapshot(once)


def _events(store: Path) -> int:
    try:
        return counts(store)["events"]
    except Exception:  # held by a writer at this moment
        return -1


def test_watch_goes_on_while_the_store_is_held_past_its_wait(tmp_path: Path, store: Path) -> None:
    write_run(tmp_path / "seed", "seed", world=1)
    assert hs("ingest", tmp_path / "seed", "--store", store).returncode == 0
    live = tmp_path / "live"
    write_run(live, "w1", world=1)
    with held_store(store):
        watcher = _watch(live, store, "--wait", "0.5")
        assert watcher.stderr is not None
        said = Lines(watcher.stderr)
        said.wait_for("not landed yet")  # the watcher says so while the store is held, and goes on
    wait_for(lambda: _events(store) == 2 * 23, timeout=60)
    watcher.send_signal(signal.SIGINT)
    watcher.wait(60)
    err = said.text()
    assert watcher.returncode == 0, err
    assert "not landed yet" in err and "in use by process" in err and "tries again" in err
    assert err.count("not landed yet") == 1  # said once, not at every poll
    assert "Traceback" not in err


def test_a_refused_writer_never_removes_the_store_another_is_creating(tmp_path: Path, store: Path) -> None:
    """Two ingests into a store that does not exist yet: the one refused (busy past --wait) leaves the other's
    store alone, and what the first landed stays."""
    folder = tmp_path / "big"
    big_campaign(folder, files=8, steps=3000)
    env = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"}
    first = subprocess.Popen([sys.executable, "-m", "honestscale", "ingest", str(folder), "--store", str(store)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    wait_for(lambda: store.exists(), timeout=30)
    refused = hs("ingest", folder, "--store", store, "--wait", "0")
    first.communicate(timeout=120)
    assert first.returncode == 0
    if refused.returncode == 75:  # it came while the first held the store (else it found everything landed)
        assert "in use by" in refused.stderr, refused.stderr
    assert counts(store)["ingested_files"] == 8


# --- a full disk -------------------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs: the store's disk, filled to the free space a case needs."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        why = f"cannot mount a tmpfs here ({mounted.stderr.strip()}): the full-disk tests need root with CAP_SYS_ADMIN"
        require(False, "a tmpfs mount (root with CAP_SYS_ADMIN)", why)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, free_kib: int) -> Path:
    """Leave ``free_kib`` KiB free on ``disk``; return the filler (delete it to free the space)."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    size = st.f_bavail * st.f_frsize - free_kib * 1024
    with filler.open("wb") as fh:
        fh.truncate(0)
        chunk = b"\0" * (1 << 20)
        while size > 0:
            fh.write(chunk[: min(size, len(chunk))])
            size -= len(chunk)
    return filler


def _forget(store: Path) -> None:
    for path in (store, store.with_name(store.name + ".wal")):
        path.unlink(missing_ok=True)


def test_a_full_disk_ends_in_a_message_and_ingesting_again_completes_the_store(
    small_disk: Path, big: Path, clean: Path
) -> None:
    """The disk fills at different points (creating the store, the first batch, the WAL mid-way, one large
    transaction): each ends with exit 2 and 'No space left' with the fix, never a traceback; the store keeps whole
    files only; freeing space and ingesting again gives the clean store."""
    store = small_disk / "s.duckdb"
    # 48 MB with 700 KiB free: DuckDB's rollback after the failed write most often fails too and invalidates the
    # database (3 in 3 here, 4 in 5 under load); the message must be the full disk's either way, never only
    # "invalidated" (CI saw that once at 1500 KiB)
    cases = (("1", 0), ("1", 16), ("1", 64), ("1", 2048), ("1", 5000), ("48", 1500), ("48", 700))
    for batch_mb, free_kib in cases:
        case = f"batches of {batch_mb} MB, {free_kib} KiB free"
        _forget(store)
        filler = _fill(small_disk, free_kib)
        full = hs("ingest", big, "--store", store, env={"HONESTSCALE_INGEST_BATCH_MB": batch_mb})
        _no_traceback(full)
        assert full.returncode == 75, (case, full.stderr[-2000:])  # retry later (exits.TEMPFAIL), was 2
        assert "No space left on device" in full.stderr and "free space" in full.stderr, (case, full.stderr)
        filler.unlink()
        _whole_files_only(store, case)
        again = hs("ingest", big, "--store", store, env={"HONESTSCALE_INGEST_BATCH_MB": batch_mb})
        assert again.returncode == 0, (case, again.stderr[-2000:])
        assert snapshot(store) == snapshot(clean), case


def _invalidated_after_a_full_disk(store: Path, big: Path, free_kib: int) -> duckdb.FatalException | None:
    """Ingest ``big`` in process with ``free_kib`` KiB free (48 MB batches): the full disk's IngestError, then what
    the next statement on that connection raises (None where DuckDB rolled back cleanly and the store goes on)."""
    _forget(store)
    filler = _fill(store.parent, free_kib)
    con = open_store(store)
    try:
        with pytest.raises(IngestError, match="No space left on device"):
            Ingester(con).ingest(discover([str(big)]).sources)
        try:
            con.execute("SELECT count(*) FROM events").fetchall()
        except duckdb.FatalException as exc:
            return exc
        return None
    finally:
        with contextlib.suppress(duckdb.Error):
            con.close()
        filler.unlink()


def test_a_store_duckdb_invalidated_names_the_error_that_did_it(
    small_disk: Path, big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a full disk DuckDB can give up on the database (its rollback fails); every later statement says only
    "invalidated because of a previous fatal error": honestscale's message names the first error as well.

    Whether the rollback fails is DuckDB's chance, not ours: with 700 KiB free it did 4 times in 5 in process on a
    loaded machine, and once in a loaded suite it did not. So the disk fills again until it does, 8 times at most
    (all 8 clean rollbacks: about 3 in a million at that rate)."""
    monkeypatch.setenv(BATCH_ENV, "48")
    for _attempt in range(8):
        invalidated = _invalidated_after_a_full_disk(small_disk / "s.duckdb", big, 700)
        if invalidated is not None:
            break
    else:
        pytest.fail("DuckDB rolled back cleanly 8 times in 8 with 700 KiB free: no invalidated store to read")
    failed = as_store_error(invalidated)
    assert isinstance(failed, StoreUnwritable)
    assert "invalidated" in failed.message and "(its first error: " in failed.message, failed.message
    assert failed.fix is not None and "free space" in failed.fix


def test_a_report_on_a_full_disk_says_so_and_leaves_the_last_report_whole(
    small_disk: Path, tmp_path: Path
) -> None:
    store = tmp_path / "s.duckdb"
    write_run(tmp_path / "ev", "r1")
    write_run(tmp_path / "ev", "r2", world=1)
    assert hs("ingest", tmp_path / "ev", "--store", store).returncode == 0
    pdf = small_disk / "report.pdf"
    first = hs("report", "--store", store, "-o", pdf, timeout=300)
    assert first.returncode == 0, first.stderr
    before = pdf.read_bytes()
    filler = _fill(small_disk, 100)
    full = hs("report", "--store", store, "-o", pdf, timeout=300)
    _no_traceback(full)
    assert full.returncode == 75  # the disk is full: retry later (exits.TEMPFAIL)
    assert f"cannot write the report {pdf}" in full.stderr and "No space left on device" in full.stderr
    assert pdf.read_bytes() == before  # the report written before is whole
    assert not list(small_disk.glob(".*.partial"))
    filler.unlink()
    assert hs("report", "--store", store, "-o", pdf, timeout=300).returncode == 0


def test_watch_on_a_full_disk_waits_for_space_then_lands_everything(small_disk: Path, tmp_path: Path) -> None:
    live, store = tmp_path / "live", small_disk / "s.duckdb"
    write_run(live, "w1")
    write_run(live, "w2", world=1)
    filler = _fill(small_disk, 0)
    watcher = _watch(live, store)
    time.sleep(3)  # several polls on the full disk
    assert watcher.poll() is None, watcher.communicate()[1]
    filler.unlink()
    once = tmp_path / "once.duckdb"
    assert hs("ingest", live, "--store", once).returncode == 0
    wait_for(lambda: _events(store) == counts(once)["events"], timeout=60)
    _out, err = _interrupt(watcher)
    assert watcher.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "not landed yet" in err and "No space left on device" in err
    assert snapshot(store) == snapshot(once)


# --- kill -9 -----------------------------------------------------------------------------------------------------


def test_kill_9_at_random_points_then_ingest_again_gives_the_clean_store(
    tmp_path: Path, big: Path, clean: Path
) -> None:
    """Ingest killed with SIGKILL at random moments (start-up, creating the store, mid-batch, committing,
    closing), several times over one store, then ingested again: whole files only at every step, the clean store at
    the end. The seed is printed on failure (HONESTSCALE_KILL_SEED=... repeats it)."""
    seed = int(os.environ.get("HONESTSCALE_KILL_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    env = {k: v for k, v in os.environ.items() if k != "HONESTSCALE_STORE"} | SMALL_BATCHES
    cmd = [sys.executable, "-m", "honestscale", "ingest", str(big), "--store", str(tmp_path / "k.duckdb")]
    t0 = time.monotonic()
    subprocess.run([*cmd[:-1], str(tmp_path / "timing.duckdb")], env=env, check=True, capture_output=True)
    t_full = time.monotonic() - t0
    store = tmp_path / "k.duckdb"
    for round_ in range(8):
        if round_ % 4 == 0:
            _forget(store)  # start over now and then, so early moments (creating the store) are hit again
        at = rng.uniform(0.0, 1.1 * t_full)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(at)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        _whole_files_only(store, f"seed {seed}, round {round_}, killed at {at:.2f} s of {t_full:.2f} s")
    again = hs("ingest", big, "--store", store, env=SMALL_BATCHES)
    assert again.returncode == 0, (seed, again.stderr[-2000:])
    assert snapshot(store) == snapshot(clean), f"seed {seed}"

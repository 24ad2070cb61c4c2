"""Issue 26: nothing lost. Files that shrank or were edited after they landed, special and hostile files, output
paths that are not regular files, Ctrl-C, edited campaign specs, and exports a paper can take: each case as a user
(or an attacker) meets it, through the command line."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, hs, query
from tests.lint_campaigns import build
from tests.runs import write_run
from tests.tools import require


def _runs(store: Path) -> list[tuple[str, str, int]]:
    sql = "SELECT r.run_id, r.status, (SELECT count(*) FROM events e WHERE e.run_id = r.run_id) FROM runs r ORDER BY 1"
    return [(r[0], r[1], int(r[2])) for r in query(store, sql)]


@pytest.mark.parametrize("cut", ["emptied", "shortened", "edited"])
def test_a_file_that_shrank_or_changed_after_it_landed_never_deletes_or_downgrades_the_run(
    tmp_path: Path, store: Path, cut: str
) -> None:
    (path,) = write_run(tmp_path / "ev", "r1", world=1, steps=30)
    assert hs("ingest", path, "--store", store).returncode == 0
    before = _runs(store)
    data = path.read_bytes()
    new = {
        "emptied": b"",
        "shortened": data[: len(data) // 2],
        "edited": data.replace(b'"samples":64', b'"samples":65'),
    }
    path.write_bytes(new[cut])
    again = hs("ingest", path, "--store", store)
    assert again.returncode == 3, again.stderr
    assert str(path) in again.stderr and "--force" in again.stderr and "Traceback" not in again.stderr
    assert _runs(store) == before and before[0][1] == "success"
    forced = hs("ingest", path, "--store", store, "--force")  # asked for: the file's content now replaces it
    assert forced.returncode in (0, 3)
    if cut == "shortened":
        assert _runs(store)[0][1] == "incomplete"


def test_special_files_are_named_and_never_read(tmp_path: Path, store: Path) -> None:
    (real,) = write_run(tmp_path / "ev", "r1", world=1, steps=5)
    odd = tmp_path / "ev" / "odd"
    odd.mkdir()
    os.mkfifo(odd / "events-rank0.jsonl")  # a reader would wait for a writer forever
    (odd / "zero.jsonl").symlink_to("/dev/zero")  # would never end
    (odd / "null.jsonl").symlink_to("/dev/null")
    got = hs("ingest", tmp_path / "ev", "--store", store, "-v", timeout=60)
    assert got.returncode == 3, (
        got.stderr
    )  # the FIFO is named; the links out of the tree, never opened, with -v
    for name in ("events-rank0.jsonl", "zero.jsonl", "null.jsonl"):
        assert str(odd / name) in got.stderr
    assert "a FIFO" in got.stderr and "links that resolve outside the paths given" in got.stderr
    assert "Traceback" not in got.stderr
    device = hs("ingest", odd / "zero.jsonl", "--store", store, timeout=60)  # named: a character device
    assert device.returncode == 3 and "a character device" in device.stderr
    assert [r[:2] for r in _runs(store)] == [("r1", "success")]
    named = hs(
        "ingest", odd / "events-rank0.jsonl", "--store", store, timeout=60
    )  # named on the command line
    assert named.returncode == 3 and "only regular files are read" in named.stderr
    assert real.exists()


def test_a_gzip_bomb_is_refused_within_the_limit_and_the_rest_lands(tmp_path: Path, store: Path) -> None:
    write_run(tmp_path / "ev", "r1", world=1, steps=5)
    bomb = tmp_path / "ev" / "bomb" / "events-rank0.jsonl.gz"
    bomb.parent.mkdir()
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        for _ in range(40):
            fh.write(b"\0" * (1 << 20))  # 40 MiB of zeros in ~40 KiB
    got = hs("ingest", tmp_path / "ev", "--store", store, env={"HONESTSCALE_MAX_FILE_MB": "16"})
    assert got.returncode == 3 and str(bomb) in got.stderr and "HONESTSCALE_MAX_FILE_MB" in got.stderr
    assert [r[:2] for r in _runs(store)] == [("r1", "success")]


def test_an_over_long_line_is_quarantined_and_a_bom_is_not_part_of_the_first_event(
    tmp_path: Path, store: Path
) -> None:
    (path,) = write_run(tmp_path / "ev", "bom", world=1, steps=5)
    lines = path.read_bytes().splitlines(keepends=True)
    huge = (
        b'{"schema":1,"run_id":"bom","rank":0,"seq":900,"time":1.0,"kind":"eval","x":"'
        + b"a" * (5 << 20)
        + b'"}\n'
    )
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(lines[:-1]) + huge + lines[-1])
    got = hs("ingest", path, "--store", store)
    assert got.returncode == 3 and "1 lines quarantined" in got.stdout, got.stdout + got.stderr
    reason = query(store, "SELECT reason, raw_length FROM quarantine")
    assert len(reason) == 1 and "longer than any event" in reason[0][0] and reason[0][1] > 5 << 20
    start = json.loads(lines[0])
    assert query(store, "SELECT status, campaign, framework, world_size FROM runs") == [
        ("success", start.get("campaign"), start["framework"], start["world_size"])
    ]


def _interrupted(
    args: list[str], ready: Callable[[], bool], timeout: float = 300, hammer: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the command, press Ctrl-C once ``ready()`` holds, and again every half second until it ends, as a user
    does when the first press goes unheeded: DuckDB 1.4's Python client drops a SIGINT that arrives while a query
    runs (DuckDB 2.0 did not; 1.4.4 is the version with the DuckLake extension), so the press that stops the
    command is one that arrives between queries."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "honestscale", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    said: dict[str, list[str]] = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda f=f, k=k: said[k].extend(f), daemon=True)
               for f, k in ((proc.stdout, "out"), (proc.stderr, "err"))]  # fmt: skip
    for r in readers:
        r.start()
    deadline = time.monotonic() + timeout
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # pressed again only while the command has not yet answered the press: it printed nothing since, nor stopped
    before = len("".join(said["err"]))
    while proc.poll() is None and time.monotonic() < deadline and len("".join(said["err"])) == before:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
    # hammer: pressed on, as an impatient user does, while the answered command closes the store and exits
    while hammer and proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.01)
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        # it hangs: killed, with what it started, so that nothing outlives the test
        for pid in _processes_naming(args[-1]):
            os.kill(pid, signal.SIGKILL)
        raise
    for r in readers:
        r.join(timeout=10)
    out, err = "".join(said["out"]), "".join(said["err"])
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _processes_naming(text: str) -> list[int]:
    """The processes whose command line holds ``text`` (a test's own temporary path): a command and what it forked."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:  # ended meanwhile
            continue
    return [pid for pid in found if pid != os.getpid()]


def test_ctrl_c_during_ingest_exits_130_and_keeps_what_landed(tmp_path: Path, store: Path) -> None:
    for i in range(40):
        write_run(tmp_path / "ev", f"r{i}", world=2, steps=2000)
    got = _interrupted(
        ["ingest", str(tmp_path / "ev"), "--store", str(store)], lambda: store.exists(), hammer=True
    )
    # the presses after the answer are ignored: none aborts the store's close ("terminate called ...") or the exit
    assert got.returncode == 130 and "Traceback" not in got.stderr, got.stderr[-2000:]
    assert "terminate" not in got.stderr, got.stderr[-2000:]
    again = hs("ingest", tmp_path / "ev", "--store", store)  # lands the rest, nothing twice
    assert again.returncode == 0, again.stderr
    clean = tmp_path / "clean.duckdb"
    assert hs("ingest", tmp_path / "ev", "--store", clean).returncode == 0
    counted = "SELECT count(*), count(DISTINCT run_id), count(DISTINCT (run_id, rank, seq)) FROM events"
    assert query(store, counted) == query(clean, counted) and query(store, counted)[0][1] == 40


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null", "fifo", "link"])
def test_report_never_replaces_a_device_a_fifo_or_a_link(tmp_path: Path, target: str) -> None:
    store = build(tmp_path, {"campaign": "c", "runs": [{"id": "a", "workers": 1, "ttt": 100.0, "reps": 2}]})
    path = Path(target)
    if target == "fifo":
        path = tmp_path / "r.pdf"
        os.mkfifo(path)
    elif target == "link":
        path = tmp_path / "r.pdf"
        (tmp_path / "precious.txt").write_text("keep me")
        path.symlink_to(tmp_path / "precious.txt")
    got = hs("report", "--store", store, "-o", path)
    assert got.returncode == 2 and "only regular files or new paths" in got.stderr, got.stderr
    assert not Path(f"{path.parent / path.stem}_files").exists()
    if target.startswith("/dev/"):
        assert path.is_char_device()
    elif target == "fifo":
        assert path.is_fifo()
    else:
        assert path.is_symlink() and (tmp_path / "precious.txt").read_text() == "keep me"
    html = hs("report", "--store", store, "-o", tmp_path / "ok.pdf", "--html", "/dev/full")
    assert html.returncode == 2 and "--html /dev/full" in html.stderr and not (tmp_path / "ok.pdf").exists()


def test_a_report_is_swapped_in_whole_stale_files_go_and_ctrl_c_leaves_the_last_one(tmp_path: Path) -> None:
    store = build(tmp_path, {"campaign": "c", "runs": [
        {"id": f"w{w}", "workers": w, "ttt": 1000.0 / w, "reps": 3} for w in (1, 2, 4, 8)]})  # fmt: skip
    pdf, files = tmp_path / "r.pdf", tmp_path / "r_files"
    assert hs("report", "--store", store, "-o", pdf, timeout=300).returncode == 0
    (files / "table9-old-report.csv").write_text("stale")
    assert hs("report", "--store", store, "-o", pdf, timeout=300).returncode == 0
    assert not (files / "table9-old-report.csv").exists() and (files / "runs.csv").exists()
    before = {p.name: p.read_bytes() for p in [pdf, *files.iterdir()]}
    staging = list(tmp_path.glob(".r_files.partial-*"))
    got = _interrupted(["report", "--store", str(store), "-o", str(pdf)],
                       lambda: any(tmp_path.glob(".r_files.partial-*/*.svg")))  # fmt: skip
    assert got.returncode == 130 and "Traceback" not in got.stderr, got.stderr[-2000:]
    # nothing outlives it: the figures' second process is killed, not left waiting for work (it once was, under load,
    # and the report waited for it at exit for ever)
    assert _processes_naming(str(pdf)) == []
    assert {p.name: p.read_bytes() for p in [pdf, *files.iterdir()]} == before
    assert list(tmp_path.glob(".r_files.partial-*")) == staging == [] and not list(
        tmp_path.glob(".r.pdf.partial")
    )


SPEC = """
[campaign]
name = "edit"
out = "runs"
repetitions = 1
[args]
model = "mlp"
dataset = "digits"
batch_size = 64
epochs = EPOCHS
sample_interval = 0
[grid]
workers = [1]
"""


def test_an_edited_spec_runs_its_new_points_and_supersedes_the_old_runs(tmp_path: Path) -> None:
    spec, store = tmp_path / "c.toml", tmp_path / "s.duckdb"
    spec.write_text(SPEC.replace("EPOCHS", "1"))
    assert hs("campaign", "run", spec, "--store", store, timeout=300).returncode == 0
    spec.write_text(SPEC.replace("EPOCHS", "1").replace('"mlp"', '"cnn"').replace("= 64", "= 256"))
    got = hs("campaign", "run", spec, "--store", store, timeout=300)
    assert got.returncode == 0, got.stderr
    assert "already ended, kept" not in got.stderr
    assert (
        "args.batch_size 64 -> 256; args.model 'mlp' -> 'cnn'" in got.stderr
        and "1 run(s) of the earlier spec are superseded" in got.stderr
    )
    runs = {r["run_id"]: r for r in json.loads(cli("runs", "--store", store, "-f", "json").stdout)}
    assert len(runs) == 2 and sorted(r["global_batch_size"] for r in runs.values()) == [64, 256]
    old = next(r for r in runs.values() if r["global_batch_size"] == 64)
    assert "mlp" in old["superseded"] and old["status"] == "success"  # kept, marked
    summary = json.loads(cli("summary", "--store", store, "-f", "json").stdout)
    assert [row["model"] for row in summary] == ["cnn"]  # never mixed into the new summary
    spec.write_text(SPEC.replace("EPOCHS", "1"))  # changed back: the first runs count again, nothing runs
    back = hs("campaign", "run", spec, "--store", store, timeout=300)
    assert back.returncode == 0 and "already ended, kept" in back.stderr
    assert [row["model"] for row in json.loads(cli("summary", "--store", store, "-f", "json").stdout)] == [
        "mlp"
    ]


def test_a_second_campaign_run_of_one_spec_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    spec, store = tmp_path / "c.toml", tmp_path / "s.duckdb"
    spec.write_text(SPEC.replace("EPOCHS", "30").replace("repetitions = 1", "repetitions = 3"))
    first = subprocess.Popen([sys.executable, "-m", "honestscale", "campaign", "run", str(spec), "--store", str(store)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        lock = tmp_path / "runs" / ".honestscale-campaign.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        second = hs("campaign", "run", spec, "--store", store)
        assert second.returncode == 2 and f"process {first.pid}" in second.stderr, second.stderr
    finally:
        first.kill()
        first.wait()
    assert "Traceback" not in second.stderr


def test_ctrl_c_stops_a_campaign_records_the_run_cancelled_and_starts_nothing_more(tmp_path: Path) -> None:
    spec, store = tmp_path / "c.toml", tmp_path / "s.duckdb"
    spec.write_text(SPEC.replace("EPOCHS", "200").replace("repetitions = 1", "repetitions = 3"))
    first = list((tmp_path / "runs").glob("*/events-rank0.jsonl"))

    def training() -> bool:
        files = list((tmp_path / "runs").glob("*/events-rank0.jsonl"))
        return bool(files) and files[0].read_text().count('"step"') > 20

    got = _interrupted(["campaign", "run", str(spec), "--store", str(store)], training)
    assert got.returncode == 130, got.stderr[-2000:]
    # the press is answered at once, while the ranks stop (a user pressing again would interrupt the landing)
    assert "SIGINT: stopping edit-" in got.stderr, got.stderr
    assert "stopped by SIGINT" in got.stderr and "Traceback" not in got.stderr
    runs = json.loads(cli("runs", "--store", store, "-f", "json").stdout)
    assert [r["status"] for r in runs] == ["cancelled"] and first == []  # one run, stopped; two never started
    assert len(list((tmp_path / "runs").glob("*/"))) == 1


def test_bad_specs_and_options_are_refused_before_anything_runs(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    cases = {
        "epochs0": (SPEC.replace("EPOCHS", "0"), "--epochs: 0 is out of range: it must be >= 1"),
        "negative": (SPEC.replace("EPOCHS", "-5"), "--epochs: -5 is out of range"),
        "batch0": (SPEC.replace("EPOCHS", "1").replace("= 64", "= 0"), "--batch-size: 0 is out of range"),
        "longname": (SPEC.replace("EPOCHS", "1").replace('"edit"', '"' + "x" * 5_000_000 + '"'), "(5,000,002 characters)"),
        "deep": ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
        "grid": (SPEC.replace("EPOCHS", "1").replace("workers = [1]", "workers = [1]\nlr = [" + ", ".join(f"0.{i + 1:05d}" for i in range(1_001)) + "]"),
                 "the spec plans 1,001 runs (1 workers x 1001 lr, x 1 repetitions), more than 1,000"),
    }  # fmt: skip
    for name, (text, said) in cases.items():
        spec = tmp_path / f"{name}.toml"
        spec.write_text(text)
        got = cli("campaign", "run", spec, "--store", store)
        assert got.returncode == 2 and said in got.stderr and "Traceback" not in got.stderr, (
            name,
            got.stderr[-500:],
        )
        assert len(got.stderr) < 2000 and not store.exists() and not (tmp_path / "runs").exists()
    config = cli("lint", "--store", store, "--config", tmp_path / "deep.toml")
    assert config.returncode == 2 and "nested too deeply" in config.stderr
    plan = cli("campaign", "run", tmp_path / "grid.toml", "--dry-run", "--max-runs", "1001")
    assert plan.returncode == 0 and "1001 runs planned" in plan.stdout and not store.exists()
    single = cli("run", "--workers", "1", "--epochs", "0", "--out", tmp_path / "runs")
    assert single.returncode == 2 and "--epochs: 0 is out of range" in single.stderr


def test_help_texts_keep_what_is_in_square_brackets() -> None:
    import re as _re

    import typer
    from typer.testing import CliRunner

    from honestscale.cli import app

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    checked = 0
    for path, cmd in walk(typer.main.get_command(app), []):
        shown = " ".join(CliRunner().invoke(app, [*path, "--help"]).output.replace("│", " ").split())
        for text in [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]:
            for inside in _re.findall(r"\\?\[([^\]]+)\]", text):
                checked += 1
                assert " ".join(inside.split())[:30] in shown, (path, inside)
    assert checked >= 10


def test_exports_hold_values_and_the_latex_compiles(tmp_path: Path, mlperf: Path) -> None:
    import csv
    import io
    import shutil

    store = tmp_path / "s.duckdb"
    assert hs(
        "ingest", mlperf / "DellEMC", "--store", store, "--campaign", "v07", timeout=600
    ).returncode in (0, 3)
    got = hs("report", "--store", store, "-o", tmp_path / "r.pdf", timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    files = tmp_path / "r_files"
    times = sorted(files.glob("table*-times-*.csv"))
    assert times
    for path in times:
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        assert rows and {"time_to_train_s_ci_low", "time_to_train_s_ci_high", "mlperf_olympic_mean_s"} <= set(
            rows[0]
        )
        for row in rows:
            for key in ("time_to_train_s", "mlperf_olympic_mean_s"):
                float(row[key])  # a number, not "12.3 min"
            assert "✗" not in row["rules_failing"] and "%" not in "".join(row.values())
    assert any("MLPerf olympic mean" in p.read_text() for p in files.glob("table*-times-*.tex"))
    for path in files.glob("*.csv"):
        assert "–" not in path.read_text() and " %" not in path.read_text()
    tex = "".join(p.read_text() for p in sorted(files.glob("*.tex")))
    assert tex.isascii()
    require(
        shutil.which("pdflatex"), "pdflatex", "apt-get install texlive-latex-base texlive-latex-recommended"
    )
    doc = tmp_path / "paper.tex"
    body = "\n".join(rf"\input{{{p.name}}}" + "\n\\clearpage" for p in sorted(files.glob("*.tex")))
    doc.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + body + "\n\\end{document}\n"
    )
    made = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", str(doc)], cwd=files,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip
    assert made.returncode == 0, made.stdout[-3000:]


def test_show_summarises_a_run_of_many_ranks_and_lists_them_on_request(tmp_path: Path, store: Path) -> None:
    write_run(tmp_path / "ev", "big", world=40, steps=5)
    assert hs("ingest", tmp_path / "ev", "--store", store).returncode == 0
    short = cli("show", "big", "--store", store)
    assert short.returncode == 0 and "40 ranks: the 3 slowest and the 3 fastest" in short.stdout
    every = cli("show", "big", "--store", store, "--ranks")
    assert every.returncode == 0 and len(every.stdout.splitlines()) > len(short.stdout.splitlines()) + 30
    assert len(json.loads(cli("show", "big", "--store", store, "-f", "json").stdout)["step_breakdown"]) == 40

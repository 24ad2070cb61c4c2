"""Every log reader linear in its input: each importer's ``parse`` on a large log, at three sizes, against reading
the same file, measured in the same run.

For each reader (``honestscale/collector/importers/``) it writes a log of the shape the real tool writes, from the
project's real fixture of that tool (``tests/data/imported/``): the fixture's repeated records (a block of training
steps, iterations or rows, with its evaluations) copied n, 2n and 4n times with the step and iteration counters,
the consumed samples and the clocks advanced, the summary and the end of the log after the last copy (one copy
gives back the fixture itself, checked, except the profiler traces, whose events are rewritten one to a line).
At the largest size (``--scale 1``): a trainer_state.json of 10^6 log_history rows, profiler traces of ~200 MB
(``kineto.MAX_CHARS`` refuses more than 256 MiB), a Megatron-LM log of 10^5 iterations, and so on.

Each size is timed in two fresh processes, best of ``--repeat`` rounds, each round the three sizes in turn (a
load that comes and goes hits them alike; a measurement over 5 s is not repeated, one under 0.3 s is repeated in
its process until it has run that long), the file read and decoded as ingest does in both. The time is the process's CPU time (user and
system) over the call, not the wall clock: on a shared machine another job's work stretches the wall clock of a
single-threaded parse by whatever share of a core it takes, and the exponent with it.

  * the reader: ``parse(path, text, None)`` (after one parse of the fixture, so that lazy imports are not timed);
  * the reference, reading the same file: ``json.loads`` of a JSON document, ``json.loads`` of every line of a JSON
    lines log (from its first ``{``: DLLogger's ``DLLL`` prefix), the lines of a text or CSV log.

Prints per reader and size: the time of each and their ratio (parse / reference), the growth exponent from the
size before, log(t2 / t1) / log(n2 / n1) with n the file's bytes (1 is linear, 2 quadratic; the reference's
beside it), and the peak RSS of each process (VmHWM: the interpreter, honestscale's importers and the text
included). A reader whose exponent from the smallest size to the largest (4x: half the noise of a doubling) is
over 1.3, or whose parse runs past ``--limit`` seconds, is flagged SUPERLINEAR (a reader that raises, FAILED, and the next reader is measured). Exit
status 0, or with ``--check`` 1 when a reader is flagged.

    python benchmarks/readers.py [--scale 0.1] [--repeat 2] [--only hf megatron] [--limit 300] [--check]
"""

from __future__ import annotations

import argparse
import csv
import gc
import gzip
import io
import json
import math
import re
import resource
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT / "tests" / "data" / "imported"
WORK = HERE / "_work" / "readers"
sys.path.insert(0, str(ROOT))

from benchmarks._results import Figure, Session  # noqa: E402

FLAG = 1.3  # a growth exponent over this, from the smallest size to the largest, is superlinear
ONCE = 5.0  # seconds: a measurement that long is not repeated (the machine's noise is small beside it)
AT_LEAST = 0.3  # seconds: a short measurement is repeated until it has run this long (50 times at most)

Writer = Callable[[str, int, Path], int]  # (fixture's text, copies, file to write) -> records written


@dataclass(frozen=True)
class Case:
    name: str
    format: str  # importers.FORMATS key
    fixture: str  # under tests/data/imported
    target: str  # the file written, under the case's folder (the readers look at its name and folder)
    records: str  # what a record is, for the table
    copies: int  # copies of the fixture's repeated block at the largest size, --scale 1
    reference: str  # "json" | "jsonl" | "lines"
    write: Writer
    exact: bool = True  # one copy gives back the fixture byte for byte
    # where given: the log is every file of this name under the size's folder (a folder of many logs, each file
    # parsed in turn as ingest does, the reference reading each file's bytes), not the target alone
    every: str | None = None


# ---- time stamps ------------------------------------------------------------------------------------------------


def _micros(stamp: str, fmt: str) -> int:
    """Microseconds since the epoch of a log's time stamp (read as UTC: only differences matter)."""
    t = datetime.strptime(stamp, fmt).replace(tzinfo=UTC)
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _stamp(micros: int, fmt: str, digits: int = 6) -> str:
    text = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)).strftime(fmt)
    return text[: len(text) - (6 - digits)]


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _index(lines: list[str], pattern: str) -> int:
    """The first line matching ``pattern``."""
    rx = re.compile(pattern)
    return next(i for i, line in enumerate(lines) if rx.search(line))


def _count(lines: list[str], pattern: str) -> int:
    rx = re.compile(pattern)
    return sum(1 for line in lines if rx.search(line))


def _find(pattern: str, text: str) -> str:
    """The first group of ``pattern``'s first match in ``text`` (there must be one)."""
    m = re.search(pattern, text)
    if m is None:
        raise ValueError(f"no {pattern!r} in {text[:80]!r}")
    return m.group(1)


def _write_blocks(
    out: Path,
    head: list[str],
    block: list[str],
    tail: list[str],
    copies: int,
    shift: Callable[[str, int], str],
) -> None:
    """``head``, ``copies`` copies of ``block`` (copy j shifted by j), ``tail`` after the last copy."""
    with out.open("w", encoding="utf-8", newline="") as f:
        f.writelines(shift(line, 0) for line in head)
        for j in range(copies):
            f.writelines(shift(line, j) for line in block)
        f.writelines(shift(line, copies - 1) for line in tail)


# ---- Hugging Face trainer_state.json ------------------------------------------------------------------------------


def _hf_entry(entry: dict[str, Any]) -> str:
    """One log_history entry as the Trainer writes it (``json.dumps(state, indent=2, sort_keys=True)``: an entry is
    flat, so the C encoder with the indent as its item separator gives the same text, fast)."""
    inner = json.dumps(entry, sort_keys=True, separators=(",\n      ", ": "))
    return "    {\n      " + inner[1:-1] + "\n    }"


def write_hf(fixture: str, copies: int, out: Path) -> int:
    """log_history's training rows and evaluations (all but the closing summary) repeated, the step and epoch
    advanced; the summary (train_runtime) after the last copy; global_step and max_steps the new total."""
    state = json.loads(fixture)
    history: list[dict[str, Any]] = state["log_history"]
    block, end = history[:-1], history[-1]
    steps, epochs = int(state["global_step"]), int(state["num_train_epochs"])
    total = steps * copies
    state.update(global_step=total, max_steps=total, num_train_epochs=epochs * copies)
    state["epoch"] = state["epoch"] * copies
    state["log_history"] = "@@HISTORY@@"
    head, rest = json.dumps(state, indent=2, sort_keys=True).split('"@@HISTORY@@"')

    def rows() -> Iterator[dict[str, Any]]:
        for j in range(copies):
            for e in block:
                yield e if j == 0 else {**e, "step": e["step"] + j * steps, "epoch": e["epoch"] + j * epochs}
        scaled = {
            "step": total,
            "epoch": end["epoch"] * copies,
            "train_runtime": end["train_runtime"] * copies,
        }
        yield end if copies == 1 else {**end, **scaled}

    n = 0
    with out.open("w", encoding="utf-8") as f:
        f.write(head + "[\n")
        for i, e in enumerate(rows()):
            f.write((",\n" if i else "") + _hf_entry(e))
            n += 1
        f.write("\n  ]" + rest + "\n")
    return n


# ---- PyTorch profiler (Kineto) traces -----------------------------------------------------------------------------

_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def write_kineto(fixture: str, copies: int, out: Path) -> int:
    """The profiled steps (every complete event, flow and annotation of the record window) repeated, each copy
    ``period`` later, ``ProfilerStep#N`` renumbered and flow ids kept apart; the metadata once, the record window
    and its instants around all copies. One event to a line (the tool pretty-prints them: same size within ~20 %)."""
    trace: dict[str, Any] = json.loads(fixture)
    events: list[dict[str, Any]] = trace["traceEvents"]
    window = next(e for e in events if e.get("cat") == "Trace")
    block = [e for e in events if e.get("ph") not in ("M", "i") and e is not window]
    fixed = [e for e in events if e.get("ph") == "M"]
    instants = [e for e in events if e.get("ph") == "i"]
    t0 = min(float(e["ts"]) for e in block)
    period = math.ceil(max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in block) - t0 + 1000.0)  # µs
    numbers = {int(m.group(1)) for e in block if (m := _PROFILER_STEP.match(str(e.get("name", ""))))}
    n_steps = len(numbers)
    ids = max((int(e["id"]) for e in block if isinstance(e.get("id"), int)), default=0) + 1

    def shifted(e: dict[str, Any], j: int) -> dict[str, Any]:
        if j == 0:
            return e
        e = {**e, "ts": round(float(e["ts"]) + j * period, 3)}
        if isinstance(e.get("id"), int):
            e["id"] += j * ids
        if m := _PROFILER_STEP.match(str(e.get("name", ""))):
            e["name"] = f"ProfilerStep#{int(m.group(1)) + j * n_steps}"
        return e

    n = 0
    with out.open("w", encoding="utf-8") as f:
        f.write("{\n")
        for i, (key, value) in enumerate(trace.items()):
            f.write((",\n" if i else "") + f"  {json.dumps(key)}: ")
            if key != "traceEvents":
                f.write(json.dumps(value))
                continue
            f.write("[\n")
            f.write(",\n".join(json.dumps(e) for e in fixed) + ",\n")
            for j in range(copies):
                f.write(",\n".join(json.dumps(shifted(e, j)) for e in block) + ",\n")
                n += len(block)
            whole = {**window, "dur": float(window["ts"]) - t0 + period * copies}
            last = {**instants[-1], "ts": round(float(instants[-1]["ts"]) + (copies - 1) * period, 3)}
            f.write(",\n".join(json.dumps(e) for e in (whole, *instants[:-1], last)) + "\n  ]")
        f.write("\n}\n")
    return n


# ---- Megatron-LM training log -------------------------------------------------------------------------------------

_MEGATRON = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})|iteration\s+(?P<it>\d+)/\s*(?P<of>\d+)"
    r"|consumed samples:\s+(?P<cs>\d+)|validation loss at iteration (?P<vit>\d+)|\(after (?P<ait>\d+) iterations\)"
    r"|^(?P<ti>\s+train_iters \.+ )(?P<tiv>\d+)"
)
_MEGATRON_TS = "%Y-%m-%d %H:%M:%S.%f"


def write_megatron(fixture: str, copies: int, out: Path) -> int:
    """Iterations 5-50 with the validation at 50 (the lines from iteration 5's to iteration 55's) repeated, each
    copy 50 iterations, 50 global batches of samples and the block's wall time later; train_iters and every line's
    total the new total; iterations 55-100, the test set and the end after the last copy."""
    lines = _lines(fixture)
    a, b = _index(lines, r"\] iteration\s+5/"), _index(lines, r"\] iteration\s+55/")
    head, block, tail = lines[:a], lines[a:b], lines[b:]
    stamp, consumed = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\]", r"consumed samples:\s+(\d+)"
    t_a, t_b = (_micros(_find(stamp, lines[i]), _MEGATRON_TS) for i in (a, b))
    span_it, of = 50, int(_find(r"/\s*(\d+)", lines[a]))
    samples = int(_find(consumed, lines[b])) - int(_find(consumed, lines[a]))
    total = of + span_it * (copies - 1)

    def shift(line: str, j: int) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group("ts"):
                return (
                    _stamp(_micros(m.group("ts"), _MEGATRON_TS) + j * (t_b - t_a), _MEGATRON_TS)
                    if j
                    else m[0]
                )
            if m.group("it"):
                it = int(m.group("it")) + j * span_it
                return f"iteration {it:8d}/{total:8d}" if j or total != of else m[0]
            if m.group("cs"):
                return f"consumed samples: {int(m.group('cs')) + j * samples:12d}" if j else m[0]
            if m.group("vit"):
                return f"validation loss at iteration {int(m.group('vit')) + j * span_it}"
            if m.group("ait"):
                return f"(after {int(m.group('ait')) + j * span_it} iterations)"
            return f"{m.group('ti')}{total}" if total != of else m[0]

        return _MEGATRON.sub(one, line) if j or total != of else line

    _write_blocks(out, head, block, tail, copies, shift)
    it = r"\] iteration\s+\d+/"
    return _count(head, it) + _count(block, it) * copies + _count(tail, it)


# ---- torchtitan: the console, the experiment metrics, the structured system logs ---------------------------------

_CONSOLE = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})|step:\s*(?P<step>\d+)|(?P<at>at step )(?P<atn>\d+)"
    r"|(?P<tot>total steps )(?P<totn>\d+)"
)
_CONSOLE_TS = "%Y-%m-%d %H:%M:%S,%f"


def write_console(fixture: str, copies: int, out: Path) -> int:
    """Steps 2-80 (and the profiler's dump at step 40) repeated, each copy 79 steps and its wall time later;
    "total steps" the new total; the dump at the last step, the completion and the teardown after the last copy."""
    lines = _lines(fixture)
    a, b = _index(lines, r"step:\s+2\s"), _index(lines, r"step:\s+80\s") + 1
    head, block, tail = lines[:a], lines[a:b], lines[b:]
    t_a, t_b = (
        _micros(_find(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", lines[i]), _CONSOLE_TS) for i in (a, b)
    )
    span, last = 79, 80
    total = last + span * (copies - 1)

    def shift(line: str, j: int) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group("ts"):
                return _stamp(_micros(m.group("ts"), _CONSOLE_TS) + j * (t_b - t_a), _CONSOLE_TS, 3)
            if m.group("step"):
                return f"step: {int(m.group('step')) + j * span:2}"
            if m.group("at"):
                return f"at step {int(m.group('atn')) + j * span}"
            return f"total steps {total}"

        return _CONSOLE.sub(one, line) if j or total != last else line

    _write_blocks(out, head, block, tail, copies, shift)
    step = r"step:\s*\d+\s"
    return _count(head, step) + _count(block, step) * copies + _count(tail, step)


def _jsonl_blocks(lines: list[str], step_of: Callable[[dict[str, Any]], Any]) -> tuple[int, int, int]:
    """Where steps 2 ... (the last step - 1) start and end, and how many steps they are."""
    steps = [step_of(json.loads(line)) for line in lines]
    last = max(s for s in steps if s is not None)
    return steps.index(2), steps.index(last), last - 2


def write_experiment(fixture: str, copies: int, out: Path) -> int:
    """Steps 2-79 of a rank's experiment metrics repeated, the step and the timestamp advanced; step 80 (the
    teardown) after the last copy."""
    lines = _lines(fixture)
    a, b, span = _jsonl_blocks(lines, lambda d: d.get("step"))
    dt = json.loads(lines[b])["timestamp"] - json.loads(lines[a])["timestamp"]

    def shift(line: str, j: int) -> str:
        if not j:
            return line
        d = json.loads(line)
        d["step"] += j * span
        d["timestamp"] += j * dt
        return json.dumps(d) + "\n"

    _write_blocks(out, lines[:a], lines[a:b], lines[b:], copies, shift)
    return len(lines) + (b - a) * (copies - 1)


def write_system(fixture: str, copies: int, out: Path) -> int:
    """Steps 2-79 of a rank's system log (layout 1: the ``int`` fields; layout 2: flat) repeated, the step, the
    clocks (time, time_ms, time_us) and seq_id advanced; the records before step 2 once, step 80 after the last
    copy."""

    def fields(d: dict[str, Any]) -> dict[str, Any]:
        got = d.get("int")
        return got if isinstance(got, dict) else d

    lines = _lines(fixture)
    a, b, span = _jsonl_blocks(lines, lambda d: fields(d).get("step"))
    dt = int(fields(json.loads(lines[b]))["time_us"]) - int(fields(json.loads(lines[a]))["time_us"])
    seq = b - a

    def shift(line: str, j: int) -> str:
        if not j:
            return line
        d = json.loads(line)
        f = fields(d)
        for key in ("step", "relative_step"):
            if isinstance(f.get(key), int):
                f[key] += j * span
        us = int(f["time_us"]) + j * dt
        f.update(time_us=us, time_ms=us // 1000, time=us // 1_000_000)
        if isinstance(f.get("seq_id"), int):
            f["seq_id"] += j * seq
        return json.dumps(d) + "\n"

    _write_blocks(out, lines[:a], lines[a:b], lines[b:], copies, shift)
    return len(lines) + (b - a) * (copies - 1)


# ---- Lightning metrics.csv, DLLogger ------------------------------------------------------------------------------


def write_lightning(fixture: str, copies: int, out: Path) -> int:
    """Epochs 0 and 1 (the training steps, the validation, the epoch's loss) repeated, epoch and global step
    advanced; the test row after the last copy."""
    lines = _lines(fixture)
    tail_at = next(i for i, line in enumerate(lines[1:], 1) if not line.startswith(("0,", "1,")))
    block = lines[1:tail_at]
    epochs, steps = 2, int(block[-1].split(",")[1]) + 1

    def shift(line: str, j: int) -> str:
        if not j:
            return line
        epoch, step, rest = line.split(",", 2)
        return f"{int(epoch) + j * epochs},{int(step) + j * steps},{rest}"

    _write_blocks(out, lines[:1], block, lines[tail_at:], copies, shift)
    return len(block) * copies + len(lines) - tail_at


def write_keras_csv(fixture: str, copies: int, out: Path) -> int:
    """Keras' CSVLogger rows (one per epoch) repeated, the epoch advanced."""
    lines = _lines(fixture)
    block = lines[1:]

    def shift(line: str, j: int) -> str:
        epoch, rest = line.split(",", 1)
        return f"{int(epoch) + j * len(block)},{rest}" if j else line

    _write_blocks(out, lines[:1], block, [], copies, shift)
    return len(block) * copies


def write_dllogger(fixture: str, copies: int, out: Path) -> int:
    """The epochs' rows (each iteration's ``train.*``, each epoch's ``val.*``) repeated, the epoch and the clocks
    advanced; the parameters and metadata once before, the ``[]`` summary after the last copy."""
    lines = _lines(fixture)
    records = [json.loads(line.removeprefix("DLLL ")) for line in lines]
    a = next(i for i, r in enumerate(records) if isinstance(r.get("step"), list))
    b = next(i for i, r in enumerate(records) if r.get("step") == [])
    epochs = max(int(r["step"][0]) for r in records[a:b]) + 1
    dt = float(records[b]["timestamp"]) - float(records[a]["timestamp"])

    def shift(line: str, j: int) -> str:
        if not j:
            return line
        r = json.loads(line.removeprefix("DLLL "))
        t = float(r["timestamp"]) + j * dt
        r["timestamp"] = f"{t:.6f}"
        r["datetime"] = datetime.fromtimestamp(t, UTC).isoformat(sep=" ")
        r["elapsedtime"] = f"{float(r['elapsedtime']) + j * dt:g}"
        if isinstance(r.get("step"), list) and r["step"]:
            r["step"] = [r["step"][0] + j * epochs, *r["step"][1:]]
        return "DLLL " + json.dumps(r) + "\n"

    _write_blocks(out, lines[:a], lines[a:b], lines[b:], copies, shift)
    return (b - a) * copies + len(lines) - (b - a)


# ---- energy records: CodeCarbon's emissions.csv, Slurm's sacct -P --------------------------------------------------


def write_tensorboard_runs(fixture: str, copies: int, out: Path) -> int:
    """The Trainer's default logging dir (``<output_dir>/runs/<date>_<host>/``) of ``copies`` trainings, each folder
    a copy of the fixture's event files (binary: copied, not written from ``fixture``'s text). A reader that reads
    every folder for each file is quadratic in the folders."""
    del fixture
    source = sorted((FIXTURES / "hf-tensorboard/runs/Nov28_07-12-23_vm").glob("events.out.tfevents.*"))
    for j in range(copies):
        folder = out.parent.parent / f"Nov28_07-12-23_vm{j:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        for file in source:
            shutil.copy(file, folder / file.name)
    return copies


def write_codecarbon(fixture: str, copies: int, out: Path) -> int:
    """The trackers' rows repeated, each copy's timestamps after the last of the copy before, their run ids new."""
    rows = list(csv.reader(io.StringIO(fixture)))
    header, body = rows[0], rows[1:]
    at, run = header.index("timestamp"), header.index("run_id")
    stamps = [datetime.fromisoformat(r[at]) for r in body]
    dt = max(stamps) - min(stamps) + timedelta(minutes=1)
    with out.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for j in range(copies):
            for r, t in zip(body, stamps, strict=True):
                if j:
                    r = list(r)
                    r[at] = (t + j * dt).isoformat()
                    r[run] = str(uuid.UUID(int=(uuid.UUID(r[run]).int + j) % 2**128))
                w.writerow(r)
    return len(body) * copies


def write_sacct(fixture: str, copies: int, out: Path) -> int:
    """The jobs and their steps repeated, the job ids after the last copy's, their Start and End later."""
    lines = _lines(fixture)
    header = lines[0].rstrip("\n").split("|")
    job, start, end = header.index("JobID"), header.index("Start"), header.index("End")
    body = [line.rstrip("\n").split("|") for line in lines[1:]]
    jobs = max(int(_find(r"^(\d+)", r[job])) for r in body) + 1
    times = [datetime.fromisoformat(r[k]) for r in body for k in (start, end) if r[k][:1].isdigit()]
    dt = max(times) - min(times) + timedelta(seconds=1)

    def shift(line: str, j: int) -> str:
        if not j:
            return line
        r = line.rstrip("\n").split("|")
        head = _find(r"^(\d+)", r[job])
        r[job] = str(int(head) + j * jobs) + r[job][len(head) :]
        for k in (start, end):
            if r[k][:1].isdigit():
                r[k] = (datetime.fromisoformat(r[k]) + j * dt).isoformat()
        return "|".join(r) + "\n"

    _write_blocks(out, lines[:1], lines[1:], [], copies, shift)
    return len(body) * copies


# ---- the cases ----------------------------------------------------------------------------------------------------

CASES: tuple[Case, ...] = (
    Case("hf", "hf-trainer-state", "hf-gpt2/trainer_state.json", "gpt2/trainer_state.json",
         "log_history rows", 29_412, "json", write_hf),  # 34 rows a copy: 10^6 rows
    Case("kineto-cpu", "kineto-trace", "kineto-cpu/rank0_trace.json.gz", "cpu/rank0_trace.json",
         "trace events", 1_900, "json", write_kineto, exact=False),  # 3 steps a copy: ~200 MB
    Case("kineto-gpu", "kineto-trace", "torchtitan-r022-kineto-trace-step80.json.gz", "gpu/rank0_trace.json",
         "trace events", 80, "json", write_kineto, exact=False),  # 1 step a copy: ~200 MB
    Case("megatron", "megatron-log", "megatron/megatron.log.gz", "gpt/megatron.log",
         "iteration lines", 2_000, "lines", write_megatron),  # 50 iterations a copy: 10^5 iterations
    Case("torchtitan-console", "torchtitan-console", "torchtitan-console-r022.log.gz", "titan/console.log",
         "step lines", 1_266, "lines", write_console),  # 79 steps a copy: 10^5 steps
    Case("torchtitan-experiment", "torchtitan-experiment",
         "torchtitan-obs/experiment_logs/trainer_rank_0_experiment.jsonl.gz",
         "obs/experiment_logs/trainer_rank_0_experiment.jsonl", "records", 256, "jsonl",
         write_experiment),  # 78 steps a copy: 2 x 10^4 steps
    Case("torchtitan-system-1", "torchtitan-system", "torchtitan-obs/system_logs/trainer_rank_0_system.jsonl.gz",
         "obs1/system_logs/trainer_rank_0_system.jsonl", "records", 128, "jsonl", write_system),  # 10^4 steps
    Case("torchtitan-system-2", "torchtitan-system",
         "torchtitan-sl/structured_logs/training.global_rank_0.20261125-235207-WM4TGC.jsonl.gz",
         "sl/structured_logs/training.global_rank_0.20261125-235207-WM4TGC.jsonl", "records", 128, "jsonl",
         write_system),  # 10^4 steps
    Case("lightning", "lightning-metrics", "lightning-digits/metrics.csv", "digits/version_0/metrics.csv",
         "rows", 5_435, "lines", write_lightning),  # 46 rows a copy: 2.5 x 10^5 rows
    Case("keras-csvlogger", "keras-csvlogger", "keras-csvlogger/training.log", "keras/training.log",
         "rows", 33_334, "lines", write_keras_csv),  # 3 rows a copy: 10^5 rows
    Case("dllogger", "dllogger", "dllogger/dllogger.json", "mlp/dllogger.json",
         "DLLL rows", 1_925, "jsonl", write_dllogger),  # 130 rows a copy: 2.5 x 10^5 rows
    Case("tensorboard-runs", "tensorboard", "hf-tensorboard/runs/Nov28_07-12-23_vm/events.out.tfevents.1795849943.vm.8940.0",
         "hf/runs/Nov28_07-12-23_vm00000/events.out.tfevents.1795849943.vm.8940.0", "run folders", 2_000, "bytes",
         write_tensorboard_runs, exact=False, every="events.out.tfevents.*"),  # 2 event files a folder
    Case("codecarbon", "codecarbon", "codecarbon/emissions.csv", "cc/emissions.csv",
         "rows", 33_334, "lines", write_codecarbon),  # 3 rows a copy: 10^5 rows
    Case("sacct", "slurm-sacct", "sacct/sacct-steps.txt", "slurm/sacct-steps.txt",
         "job and step lines", 31_250, "lines", write_sacct),  # 16 lines a copy: 5 x 10^5 lines
)  # fmt: skip


def _fixture(case: Case) -> str:
    raw = (FIXTURES / case.fixture).read_bytes()
    if case.fixture.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", "backslashreplace").removeprefix("\ufeff")


# ---- one measurement, in a fresh process -------------------------------------------------------------------------


def _read(path: Path) -> str:
    """The file's text, as ingest reads a log (bytes decoded, a BOM dropped)."""
    return path.read_bytes().decode("utf-8", "backslashreplace").removeprefix("\ufeff")


def _logs(case: Case, path: Path) -> list[Path]:
    """The files a measurement reads: the target, or every file of the case's folder of logs."""
    if case.every is None:
        return [path]
    root = path.parents[len(Path(case.target).parts) - 1]
    return sorted(root.rglob(case.every))


def _reference(path: Path, kind: str) -> int:
    if kind == "bytes":  # a binary log: its bytes read
        return len(path.read_bytes())
    text = _read(path)
    if kind == "json":
        json.loads(text)
        return 1
    lines = text.splitlines()
    if kind == "jsonl":
        for line in lines:
            if (i := line.find("{")) >= 0:
                json.loads(line[i:])
    return len(lines)


def _peak_rss() -> int:
    """This process's peak RSS, bytes: VmHWM, its own address space's (``ru_maxrss`` keeps, across fork and exec,
    the parent's at the fork), else ``ru_maxrss``."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return int(_find(r"VmHWM:\s+(\d+) kB", status)) * 1024


def worker(side: str, case: Case, path: Path, repeat: int) -> None:
    """Print one JSON line: the best of ``repeat`` times, the peak RSS, what the reader got."""
    sys.path.insert(0, str(ROOT))
    from honestscale.collector import importers

    reader = importers.FORMATS[case.format]
    if side == "parse":  # the reader's lazy imports done, its caches warm: not timed
        reader.parse(FIXTURES / case.fixture, _fixture(case), None)
    gc.collect()
    base = _peak_rss()
    best, got, runs, spent = math.inf, dict[str, Any](), 0, 0.0
    while runs < repeat or (spent < AT_LEAST and runs < 50):
        t = time.process_time()
        if side == "reference":
            lines = sum(_reference(p, case.reference) for p in _logs(case, path))
            dt = time.process_time() - t
            got = {"lines": lines}
        else:
            every = [reader.parse(p, _read(p), None) for p in _logs(case, path)]
            dt = time.process_time() - t
            steps = sum(len((parsed.profile or {}).get("steps", [])) for parsed in every)
            got = {"events": sum(len(x.events) for x in every), "energy": sum(len(x.energy) for x in every),
                   "profiled_steps": steps, "bad": sum(len(x.bad) for x in every),
                   "warnings": [w for x in every for w in x.warnings][:3]}  # fmt: skip
            del every
        best, runs, spent = min(best, dt), runs + 1, spent + dt
        gc.collect()
        if dt > ONCE:
            break
    peak = _peak_rss()
    print(json.dumps({"seconds": best, "peak": peak, "base": base, **got}))


@dataclass
class Measure:
    seconds: float | None  # None: ran past --limit, or failed
    peak: int
    got: dict[str, Any]
    error: str | None = None  # the worker's last line of error


def _measure(side: str, case: Case, path: Path, repeat: int, limit: float) -> Measure:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", side, "--only", case.name,
           "--file", str(path), "--repeat", str(repeat)]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        return Measure(None, 0, {})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Measure(None, 0, {}, f"{side} failed: {last}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return Measure(float(got.pop("seconds")), int(got.pop("peak")), got)


# ---- the run ------------------------------------------------------------------------------------------------------


def _exponent(t1: float, t2: float, n1: int, n2: int) -> float:
    return math.log(t2 / t1) / math.log(n2 / n1)


def _check_exact(case: Case, fixture: str) -> None:
    """One copy of the writer gives back the fixture: the block repeated is the tool's own text."""
    probe = WORK / "one-copy" / Path(case.target).name
    probe.parent.mkdir(parents=True, exist_ok=True)
    case.write(fixture, 1, probe)
    if _read(probe) != fixture:
        raise SystemExit(f"{case.name}: one copy of the writer differs from {case.fixture}")
    probe.unlink()


@dataclass
class Size:
    copies: int
    path: Path
    records: int
    nbytes: int
    written: float  # seconds its writing took
    best: dict[str, Measure]  # "parse", "reference" -> the best measurement so far


def _write_size(case: Case, fixture: str, i: int, copies: int) -> Size:
    folder = WORK / case.name / f"size{i}"
    if folder.exists():
        shutil.rmtree(folder)
    path = folder / case.target
    path.parent.mkdir(parents=True)
    if case.format == "lightning-metrics":  # hparams.yaml beside it, as Lightning writes it
        shutil.copy(FIXTURES / case.fixture.replace("metrics.csv", "hparams.yaml"), path.parent)
    t = time.perf_counter()
    records = case.write(fixture, copies, path)
    nbytes = sum(p.stat().st_size for p in _logs(case, path))
    return Size(copies, path, records, nbytes, time.perf_counter() - t, {})


def _row(case: Case, size: Size, before: Size | None) -> str:
    ours, ref = size.best["parse"], size.best["reference"]
    assert ours.seconds is not None and ref.seconds is not None
    grow = ""
    if before is not None:
        b_ours, b_ref = before.best["parse"].seconds, before.best["reference"].seconds
        assert b_ours is not None and b_ref is not None
        e_parse = _exponent(b_ours, ours.seconds, before.nbytes, size.nbytes)
        grow = f"{e_parse:5.2f} ({_exponent(b_ref, ref.seconds, before.nbytes, size.nbytes):4.2f})"
    got = ours.got
    out = (f"{got['events']:,} events" if got["events"] else
           f"{got['profiled_steps']:,} profiled steps" if got["profiled_steps"] else
           f"{got['energy']:,} energy records")  # fmt: skip
    return (
        f"  {size.records:>11,} {case.records:<18} {size.nbytes / 2**20:7.1f} MiB  {ours.seconds:7.3f} s "
        f"{ref.seconds:7.3f} s {ours.seconds / ref.seconds:7.2f}x {grow:>12}  {ours.peak / 2**20:6,.0f} / "
        f"{ref.peak / 2**20:5,.0f} MiB  -> {out}"
        + (f", {got['bad']:,} quarantined" if got["bad"] else "")
        + (f"; warnings: {got['warnings']}" if got["warnings"] else "")
        + f"  [written in {size.written:.1f} s]"
    )


def run_case(case: Case, scale: float, repeat: int, limit: float) -> tuple[str, list[str]]:
    """Measure one reader at three sizes, ``repeat`` rounds of the three in turn (a load that comes and goes hits
    them alike); returns its verdict ("", "SUPERLINEAR", "FAILED") and the table's rows."""
    fixture = _fixture(case)
    if case.exact:
        _check_exact(case, fixture)
    largest = max(4, round(case.copies * scale))
    copies = (max(1, largest // 4), max(2, largest // 2), largest)
    sizes = [_write_size(case, fixture, i, c) for i, c in enumerate(copies)]
    problem: tuple[int, str] | None = None  # (the size it happened at, what happened)
    for round_ in range(repeat):
        for i, size in enumerate(sizes):
            if problem is not None and i >= problem[0]:
                break
            for side in ("reference", "parse"):
                had = size.best.get(side)
                if round_ and had is not None and had.seconds is not None and had.seconds > ONCE:
                    continue  # a long measurement once: the noise is small beside it
                m = _measure(side, case, size.path, 1, limit)
                if m.seconds is None and had is not None and not m.error:
                    continue  # past the limit this time, measured before: the best stands
                if m.error or m.seconds is None:
                    problem = (
                        i,
                        m.error or f"{side} ran past --limit {limit:.0f} s: larger sizes not measured",
                    )
                    break
                if had is None or (had.seconds is not None and m.seconds < had.seconds):
                    size.best[side] = m if had is None else Measure(m.seconds, max(m.peak, had.peak), m.got)
                else:
                    had.peak = max(had.peak, m.peak)
    shutil.rmtree(WORK / case.name)
    done = sizes[: problem[0]] if problem else sizes
    rows = [_row(case, size, done[i - 1] if i else None) for i, size in enumerate(done)]
    verdict, label = "", ""
    if problem is not None:
        size = sizes[problem[0]]
        rows.append(f"  {size.records:>11,} {case.records:<18} {size.nbytes / 2**20:7.1f} MiB  {problem[1]}")
        timed_out = "past --limit" in problem[1]
        if timed_out and "parse" in problem[1] and done:
            # the growth to the size past the limit is at least this, from any size measured
            low = max(_exponent(d.best["parse"].seconds or 1.0, limit, d.nbytes, size.nbytes) for d in done)
            grown = [d.best["parse"].seconds or 1.0 for d in done]
            measured = (
                _exponent(grown[0], grown[-1], done[0].nbytes, done[-1].nbytes) if len(done) > 1 else 0.0
            )
            rows[-1] += f"; exponent to it at least {low:.2f}"
            verdict = "SUPERLINEAR" if max(low, measured) > FLAG else ""
            label = f"; exponent at least {low:.2f} to the size past the limit, {measured:.2f} over those measured"
        elif timed_out and "parse" in problem[1]:
            verdict, label = "SUPERLINEAR", f" (the smallest size past --limit {limit:.0f} s)"
        else:
            verdict = "FAILED" if not timed_out else ""
    else:
        a, b = sizes[0], sizes[-1]
        e = _exponent(a.best["parse"].seconds or 1.0, b.best["parse"].seconds or 1.0, a.nbytes, b.nbytes)
        r = _exponent(
            a.best["reference"].seconds or 1.0, b.best["reference"].seconds or 1.0, a.nbytes, b.nbytes
        )
        label = f"; exponent from the smallest size to the largest: {e:.2f} (the reference's {r:.2f})"
        _measured(case.name, e, b, r)
        if e > FLAG:
            verdict = "SUPERLINEAR"
    title = f"{case.name}: {case.format}, from {case.fixture}; reference: {_REFERENCE[case.reference]}{label}"
    return verdict, [title + (f"  {verdict}" if verdict else ""), *rows]


def _measured(name: str, exponent: float, largest: Size, reference_exponent: float) -> None:
    parse, reference = largest.best["parse"].seconds or 1.0, largest.best["reference"].seconds or 1.0
    MEASURED[name] = (exponent, parse / reference, reference_exponent)


# per reader measured at every size: its exponent, its ratio at the largest size, its reference's exponent
MEASURED: dict[str, tuple[float, float, float]] = {}

_REFERENCE = {
    "json": "json.loads of the document",
    "jsonl": "json.loads of every line",
    "lines": "its lines",
    "bytes": "every file's bytes",
}


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="the sizes times this (0.05 for a quick run); the largest at 1 is ~10^5-10^6 records",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="rounds: each size measured this many times, in turn; the best is kept",
    )
    ap.add_argument(
        "--only",
        nargs="+",
        metavar="READER",
        choices=[c.name for c in CASES],
        help="these readers only: " + ", ".join(c.name for c in CASES),
    )
    ap.add_argument(
        "--limit",
        type=float,
        default=300.0,
        help="seconds a measurement may take (a parse past it is flagged; larger sizes skipped)",
    )
    ap.add_argument("--check", action="store_true", help="exit 1 when a reader is flagged superlinear")
    ap.add_argument("--record", action="store_true", help="append the figures to benchmarks/results.jsonl")
    ap.add_argument("--worker", choices=("parse", "reference"), help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(None if argv is None else list(argv))  # fmt: skip
    cases = [c for c in CASES if not args.only or c.name in args.only]
    if args.worker:
        worker(args.worker, cases[0], args.file, args.repeat)
        return 0
    session = Session("readers")
    print(
        f"{'records':>30} {'text':>11}   {'parse':>9} {'reference':>9} {'ratio':>7} "
        f"{'exponent':>12}  {'peak RSS parse / ref':>20}  (exponent: from the size before; the reference's in ())"
    )
    verdicts: dict[str, list[str]] = {"SUPERLINEAR": [], "FAILED": []}
    t0 = time.perf_counter()
    try:
        for case in cases:
            verdict, rows = run_case(case, args.scale, args.repeat, args.limit)
            print("\n".join(rows), flush=True)
            if verdict:
                verdicts[verdict].append(case.name)
    finally:  # the logs written are large: never left behind
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"\n{len(cases)} readers in {time.perf_counter() - t0:.0f} s (--scale {args.scale}, best of "
          f"{args.repeat}); superlinear (exponent over {FLAG}): {', '.join(verdicts['SUPERLINEAR']) or 'none'}"
          + (f"; failed: {', '.join(verdicts['FAILED'])}" if verdicts["FAILED"] else ""))  # fmt: skip
    if MEASURED:
        session.finish(_figures(len(cases), args.scale, verdicts), args.record)
    return 1 if args.check and any(verdicts.values()) else 0


def _figures(readers: int, scale: float, verdicts: dict[str, list[str]]) -> list[Figure]:
    """The worst reader's growth exponent and ratio to reading its file, the next two named beside them."""
    by_exp = sorted(MEASURED.items(), key=lambda kv: -kv[1][0])
    by_ratio = sorted(MEASURED.items(), key=lambda kv: -kv[1][1])
    unmeasured = sorted(set(verdicts["SUPERLINEAR"] + verdicts["FAILED"]) - set(MEASURED))
    missing = f"; not measured at every size: {', '.join(unmeasured)}" if unmeasured else ""
    what = f"{len(MEASURED)} of {readers} readers at --scale {scale:g}"
    none = "; best of rounds: no spread kept"
    worst_exp = (
        ", ".join(f"{n} {v[0]:.2f} (its reference {v[2]:.2f})" for n, v in by_exp[:3]) + missing + none
    )
    worst_ratio = ", ".join(f"{n} {v[1]:.2f}" for n, v in by_ratio[:3]) + none
    return [
        Figure("readers", f"largest growth exponent n to 4n, {what}", by_exp[0][1][0], "", 0.0, "lower",
               f"<= {FLAG}", worst_exp),
        Figure("readers", f"largest ratio parse / reading the file at 4n, {what}", by_ratio[0][1][1], "x",
               0.0, "lower", "", worst_ratio),
    ]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

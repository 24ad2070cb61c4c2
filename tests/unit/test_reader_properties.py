"""Properties every reader of another tool's log keeps (``honestscale/collector/importers``), on the real logs.

The inputs are the logs the tools themselves wrote (tests/data/imported, see its README.md); hypothesis draws
mutations of them in memory: a line dropped or written twice, the file cut at a byte, a number of a line made NaN,
inf, -1, 1e308 or a word, garbage lines, a UTF-8 byte order mark, a field added to a row. Each mutated log is
written to a temporary file at its fixture's relative path (readers read the file's modification time and its
folder) and handed to its reader as the ingest hands it (``collector/ingest.py``: decoded with backslashreplace,
a leading byte order mark dropped). Whatever the mutation, a reader never raises, never makes a number that is not
finite or an event the store would quarantine, never calls a rate a quality, keeps accuracies in their bounds and
never loses a value in silence; on the unmutated logs each logged iteration is one step. Expected values come from
the raw files (a few lines of regex/json/csv here) or the expected.json their maker wrote, never from the readers.

The number of examples per reader is bounded (``HONESTSCALE_FUZZ_EXAMPLES``, 60 by default) so CI spends a fixed
time here.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, reject, settings
from hypothesis import strategies as st

from honestscale import events as ev
from honestscale.collector import importers
from honestscale.collector._parsed import Parsed
from honestscale.collector.importers._build import is_rate, quality_bounds
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "imported"
EXAMPLES = int(os.environ.get("HONESTSCALE_FUZZ_EXAMPLES", "60"))
# CI draws the same examples every run (a gate that passes or fails for the code, not for the draw); elsewhere each
# run draws anew, and HONESTSCALE_FUZZ_EXAMPLES=1000 explores (what a long run finds is pinned below, then fixed)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI") == "true",
)
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Log:
    """A real log of tests/data/imported and the reader (format) it is in."""

    format: str
    rel: str  # its path under tests/data/imported (.gz: stored compressed, read decompressed)
    sep: bytes | None = None  # the field separator of a delimited file (CSV, sacct -P), None for the others
    # the folders above it read with it, copied beside the mutated file (an MLflow file store run's meta.yaml: its
    # run's folder and its experiment's, 2); 0 for a file read alone
    folders: int = 0

    def __repr__(self) -> str:
        return self.rel


TITAN_EXPERIMENT = "torchtitan-obs/experiment_logs/trainer_rank_0_experiment.jsonl.gz"
TITAN_SL = "torchtitan-sl/structured_logs/training.global_rank_0.20261125-235207-WM4TGC.jsonl.gz"
KERAS_TRAIN = next(
    str(p.relative_to(DATA))
    for p in (DATA / "keras-tensorboard/logs/fit/train").glob("events.out.tfevents.*")
)
LOGS = (
    Log("torchtitan-console", "torchtitan-console-r022.log.gz"),
    Log("torchtitan-console", "torchtitan-console-obs.log.gz"),
    Log("torchtitan-console", "torchtitan-console-sl.log.gz"),
    Log("torchtitan-experiment", TITAN_EXPERIMENT),
    # layout 1 is read alone here: its experiment-log twin is not copied beside it (else it is read with the twin)
    Log("torchtitan-system", "torchtitan-obs/system_logs/trainer_rank_0_system.jsonl.gz"),
    Log("torchtitan-system", TITAN_SL),
    Log("megatron-log", "megatron/megatron.log.gz"),
    Log("hf-trainer-state", "hf-gpt2/trainer_state.json"),
    Log("lightning-metrics", "lightning-digits/metrics.csv", b","),
    Log("lightning-metrics", "lightning-throughput/metrics.csv", b","),
    Log("keras-csvlogger", "keras-csvlogger/training.log", b","),
    Log("dllogger", "dllogger/dllogger.json"),
    Log("dllogger", "dllogger-dle/dllogger.json"),
    Log("dllogger", "dllogger-dle-pf20/dllogger.json"),
    Log("kineto-trace", "kineto-cpu/rank0_trace.json.gz"),
    Log("kineto-trace", "torchtitan-r022-kineto-trace-step80.json.gz"),
    Log("codecarbon", "codecarbon/emissions.csv", b","),
    Log("slurm-sacct", "sacct/sacct-jobs.txt", b"|"),
    Log("slurm-sacct", "sacct/sacct-steps.txt", b"|"),
    # binary: the mutations of lines and numbers damage records, which the readers must say, never raise on
    Log("tensorboard", "lightning-tensorboard/events.out.tfevents.1795846983.vm.6018.0"),
    Log("tensorboard", "tensorboard-ddp/rank0/events.out.tfevents.1795847314.vm.8451.0"),
    # Keras' train writer, its validation writer's folder copied beside it (read as one training)
    Log("tensorboard", KERAS_TRAIN, folders=3),
    Log("mlflow-sqlite", "mlflow-hf/mlflow.db"),
    Log(
        "mlflow-files",
        "mlflow-hf-files/mlruns/507485484606213271/ddb40ed6742546309025f3070ac264ae/meta.yaml",
        folders=2,
    ),
    Log("wandb-offline", "wandb-ddp/wandb/offline-run-20261128_064606-y01v9j1x/run-y01v9j1x.wandb"),
)
FORMATS = sorted(importers.FORMATS)
_BY_REL = {log.rel: log for log in LOGS}


@cache
def _raw(log: Log) -> bytes:
    path = DATA / log.rel
    return gzip.decompress(path.read_bytes()) if log.rel.endswith(".gz") else path.read_bytes()


def _read(log: Log, data: bytes) -> Parsed:
    """``data`` read by ``log``'s reader as the ingest reads a file: written where the fixture sits (its name and
    folder), decoded with backslashreplace and a leading byte order mark dropped."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "imported" / log.rel.removesuffix(".gz")
        if log.folders:
            above = Path(log.rel).parents[log.folders - 1]
            shutil.copytree(DATA / above, Path(tmp) / "imported" / above)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        text = data.decode("utf-8", "backslashreplace").removeprefix("\ufeff")
        return importers.FORMATS[log.format].parse(path, text, None)


# ---- the mutations -------------------------------------------------------------------------------------------

# a number standing alone: never the digit of a name (`adam_beta1`, `rank0`: changing one renames a field)
NUMBER = re.compile(rb"(?<![A-Za-z_\d.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
# NaN and infinities as Python's json ("NaN", "Infinity"), str() ("nan", "inf") and "{:E}" ("NAN", "INF") write them
NOT_A_NUMBER = (b"NaN", b"nan", b"NAN", b"inf", b"-inf", b"INF", b"Infinity", b"-Infinity", b"oops", b"n/a")
TOKENS = (*NOT_A_NUMBER, b"-1", b"1e308")
# lines that look like the start of a record of one format or another
NEAR_MISSES = [b"", b"{", b"}", b"[]", b"null", b"{}", b"DLLL {", b'DLLL {"timestamp": "1"}', b"step: 1",
               b" iteration 1/ 1 |", b",,,,", b"|||", b"\x00\x00", b"Traceback (most recent call last):",
               b"ValueError: boom", b'{"step": 1, "rank": 0, "key": "k", "reduce": "r"}']  # fmt: skip
GARBAGE = st.one_of(
    st.text(max_size=40).map(lambda t: t.encode("utf-8")),
    st.binary(max_size=24),
    st.sampled_from(NEAR_MISSES),
).map(lambda b: b.replace(b"\n", b" "))
# Tokens not drawn for the readers found to break a property with them (each pinned by a strict xfail below, red
# once the reader is fixed: then drop its entry), so that the properties keep checking the rest: -1 as a time
# (Megatron-LM, torchtitan) and as an epoch (DLLogger): an event the store quarantines; 1e308 kWh as one part's
# energy (CodeCarbon: an infinite number of joules in the record). All in test_known_contract_breaks.
NOT_DRAWN: dict[str, set[bytes]] = {}
# Cases found and since fixed: they stay as plain tests (green), no longer xfail (lone CRs, a system log with no
# step yet, negative times of Megatron-LM and torchtitan's experiment metrics, a part's infinite joules, NaN losses)
FIXED = {
    "hf-eval-epoch",
    "lightning-lone-cr",
    "megatron-iteration",
    "torchtitan-console-loss",
    "torchtitan-console-config",
    "torchtitan-console-step-time",
    "torchtitan-console-trainer",
    "dllogger-summary",
    "codecarbon-lone-cr",
    "torchtitan-system-no-step-yet",
    "megatron-elapsed",
    "torchtitan-experiment-step-time",
    "codecarbon-part-energy",
    "megatron-lm-loss",
    "megatron-validation",
    "torchtitan-system-step-span",
    "sacct-start",
    "dllogger-batch-size",
    "dllogger-epoch",
    "torchtitan-console-params",
    "torchtitan-console-peak",
}
KINDS = ("drop", "twice", "cut", "number", "garbage", "torn", "bom", "bom-line", "field")


@dataclass(frozen=True)
class Mutated:
    """A real log after some mutations (``done`` says which, in order, enough to make it again)."""

    log: Log
    data: bytes
    done: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Mutated({self.log.rel}: {'; '.join(self.done) or 'unchanged'})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how hypothesis shows a failing draw
        printer.text(repr(self))

    @property
    def handed(self) -> bool:
        """Whether the ingest hands this file to the log's reader: its reader is picked by content, the first MiB
        with a leading byte order mark dropped (collector/_sources.py); a file cut or changed past that is
        another format's, or none's, and never reaches this reader."""
        head = self.data[: 1 << 20].removeprefix(BOM)
        return importers.FORMATS[self.log.format].sniff(DATA / self.log.rel, head)


@cache
def _source_lines(log: Log) -> list[int]:
    """The lines (0-based) the unmutated log's reading made an event or an energy record of."""
    parsed = _read(log, _raw(log))
    return sorted({n - 1 for n, _ in parsed.events} | {int(r["line"]) - 1 for r in parsed.energy})


def _replace_number(draw: st.DrawFn, log: Log, lines: list[bytes], tokens: tuple[bytes, ...]) -> str:
    """One number of one line written as one of ``tokens``; what was done, in words. Half the time the line is
    one the unmutated log's events came from (a random line of a long log is seldom one the reader uses)."""
    source, from_source = _source_lines(log), draw(st.booleans())
    if source and from_source:
        start = draw(st.sampled_from(source)) % len(lines)
    else:
        start = draw(st.integers(0, len(lines) - 1))
    # the first line with a number from there on
    i = next(
        (j % len(lines) for j in range(start, start + len(lines)) if NUMBER.search(lines[j % len(lines)])),
        None,
    )
    if i is None:
        return "no number to replace"
    found = list(NUMBER.finditer(lines[i]))
    m = found[draw(st.integers(0, len(found) - 1))]
    token = draw(st.sampled_from(tokens))
    lines[i] = lines[i][: m.start()] + token + lines[i][m.end() :]
    return f"line {i + 1}: number {m.group().decode()!r} (byte {m.start()}) -> {token.decode()!r}"


def _add_field(draw: st.DrawFn, log: Log, lines: list[bytes], i: int) -> str:
    """A field added to line ``i``: a delimited row gets one more column, a JSON object one more key, another
    line a ``| extra: value`` pair."""
    line = lines[i]
    if log.sep is not None:
        value = draw(st.sampled_from([b"1", b"NaN", b"x", b""]))
        lines[i] = line.rstrip(b"\r") + log.sep + value
    elif (at := line.find(b"{")) >= 0:
        value = draw(st.sampled_from([b"1", b"NaN", b'"x"', b"null", b"1e400"]))
        lines[i] = line[: at + 1] + b'"hs_extra": ' + value + b", " + line[at + 1 :]
    else:
        value = draw(st.sampled_from([b"1", b"NaN", b"x"]))
        lines[i] = line + b" | extra: " + value
    return f"line {i + 1}: field added ({value.decode()!r})"


def _mutate(draw: st.DrawFn, log: Log, data: bytes, kind: str) -> tuple[bytes, str]:
    """``data`` after one mutation of ``kind``, and what it was."""
    if kind == "cut":
        at = draw(st.integers(0, max(0, len(data) - 1)))
        return data[:at], f"cut at byte {at} of {len(data)}"
    if kind == "bom":  # the ingest drops one; a file saved twice by a tool that adds one has two
        marks = draw(st.integers(1, 2))
        return BOM * marks + data, f"{marks} UTF-8 byte order mark(s) at the start"
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "drop":
        del lines[i]
        said = f"line {i + 1} dropped"
    elif kind == "twice":
        lines.insert(i, lines[i])
        said = f"line {i + 1} written twice"
    elif kind == "number":
        said = _replace_number(
            draw, log, lines, tuple(t for t in TOKENS if t not in NOT_DRAWN.get(log.format, ()))
        )
    elif kind == "garbage":
        junk = draw(GARBAGE)
        lines.insert(i, junk)
        said = f"garbage {junk!r} inserted as line {i + 1}"
    elif kind == "torn":  # a line cut short inside the file (a writer killed, then restarted)
        j = draw(st.integers(0, len(lines) - 1))
        at = draw(st.integers(0, len(lines[j])))
        lines.insert(i, lines[j][:at])
        said = f"line {j + 1}'s first {at} bytes inserted as line {i + 1}"
    elif kind == "bom-line":  # a second file with its own mark appended (cat a.csv b.csv)
        lines[i] = BOM + lines[i]
        said = f"a UTF-8 byte order mark at the start of line {i + 1}"
    else:
        said = _add_field(draw, log, lines, i)
    return b"\n".join(lines), said


@st.composite
def mutated(draw: st.DrawFn, fmt: str) -> Mutated:
    """A real log of the reader ``fmt`` after one to three mutations."""
    log = draw(st.sampled_from([g for g in LOGS if g.format == fmt]))
    data, done = _raw(log), []
    for kind in draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3)):
        data, said = _mutate(draw, log, data, kind)
        done.append(said)
    return Mutated(log, data, tuple(done))


@st.composite
def one_bad_number(draw: st.DrawFn, fmt: str) -> tuple[Mutated, int]:
    """A real log of the reader ``fmt`` with one number of one line made NaN, inf or a word; and that line."""
    log = draw(st.sampled_from([g for g in LOGS if g.format == fmt]))
    lines = _raw(log).split(b"\n")
    said = _replace_number(draw, log, lines, NOT_A_NUMBER)
    assert said.startswith("line "), said  # every real log has numbers
    line = int(said.split(":", 1)[0].removeprefix("line "))
    return Mutated(log, b"\n".join(lines), (said,)), line


def _bad_number(rel: str, pattern: bytes, token: bytes) -> tuple[Mutated, int]:
    """The real log ``rel`` with the number ``pattern``'s group 1 matches first written as ``token``; its line."""
    log = _BY_REL[rel]
    data = _raw(log)
    m = re.search(pattern, data, re.MULTILINE)
    assert m is not None, pattern
    line = data.count(b"\n", 0, m.start(1)) + 1
    said = f"line {line}: number {m[1].decode()!r} -> {token.decode()!r}"
    return Mutated(log, data[: m.start(1)] + token + data[m.end(1) :], (said,)), line


# ---- what is checked -----------------------------------------------------------------------------------------


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every leaf of a JSON-like value with its path (dict keys and list indices)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, str(k)))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _nonfinite(value: Any) -> list[tuple[tuple[str | int, ...], Any]]:
    return [(p, v) for p, v in _leaves(value) if isinstance(v, float) and not math.isfinite(v)]


def _numbers(parsed: Parsed) -> Counter[tuple[Any, ...]]:
    """The finite numbers the reader made, by where they are (an event's kind and path, an energy record's path):
    a Counter, so that a value that is gone shows as one fewer."""
    got: Counter[tuple[Any, ...]] = Counter()
    for _, event in parsed.events:
        got.update((event["kind"], *p) for p, v in _leaves(event) if _is_number(v) and math.isfinite(v))
    for record in parsed.energy:
        got.update(("energy", *p) for p, v in _leaves(record) if p != ("line",) and _is_number(v))
    return got


def _names_line(text: str, line: int) -> bool:
    """A warning or note that names ``line`` ("line 12: ...", "lines 5, 12 and 3 more")."""
    named = re.finditer(r"\blines? (\d+(?:(?:, | and )\d+)*)", text)
    return any(str(line) in re.findall(r"\d+", m[1]) for m in named)


# ---- 1-3: on every mutation ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_a_reader_never_raises_on_a_mutated_log(fmt: str, data: st.DataObject) -> None:
    """Whatever is done to a real log (lines dropped, repeated, torn or garbage; the file cut; a number NaN, inf,
    -1, 1e308 or a word; a byte order mark; a field more), its reader returns what it could read: a reader that
    raises refuses the whole file (collector/_read.py: "the reader failed on it ... report it")."""
    m = data.draw(mutated(fmt))
    assume(m.handed)
    _parse(m)


# Readers found to raise on some hostile logs: (the exception, words of its message) per reader. Each is pinned by
# a strict xfail in test_known_raises (red once fixed: then drop its entry); the properties discard an input that
# raises exactly so, and fail on any other exception.
RAISES: dict[str, tuple[type[Exception], str]] = {}


def _parse(m: Mutated) -> Parsed:
    """``m`` read by its reader (see _read); an input that raises a known bug of RAISES is discarded."""
    try:
        return _read(m.log, m.data)
    except Exception as err:
        known = RAISES.get(m.log.format)
        if known is not None and isinstance(err, known[0]) and known[1] in str(err):
            reject()
        raise


def _raises(case: str, rel: str, change: Callable[[bytes], bytes], what: str, why: str) -> Any:
    if case in FIXED:
        return pytest.param(rel, change, what, id=case)
    exc = RAISES[_BY_REL[rel].format][0]
    return pytest.param(
        rel, change, what, id=case, marks=pytest.mark.xfail(strict=True, raises=exc, reason=why)
    )


def _insert(line: int, junk: bytes) -> Callable[[bytes], bytes]:
    return lambda data: b"\n".join([*data.split(b"\n")[: line - 1], junk, *data.split(b"\n")[line - 1 :]])


KNOWN_RAISES = [
    _raises("lightning-lone-cr", "lightning-digits/metrics.csv", _insert(2, b"\r0"), "'\\r0' inserted as line 2",
            "lightning.py reads the text with csv.DictReader(io.StringIO(text)): a carriage return alone inside "
            "a line (old Mac line ends, a progress bar's \\r) raises _csv.Error 'new-line character seen in "
            "unquoted field', so the ingest refuses the whole file instead of quarantining the line"),
    _raises("codecarbon-lone-cr", "codecarbon/emissions.csv", _insert(2, b"\r0"), "'\\r0' inserted as line 2",
            "codecarbon.py: the same csv.DictReader(io.StringIO(text)) raises _csv.Error on a carriage return "
            "alone inside a line: the whole file is refused"),
    _raises("torchtitan-system-no-step-yet", TITAN_SL, lambda data: data.split(b"\n")[0] + b"\n",
            "its first line only",
            "torchtitan.py parse_system (since 7600cf2: `first = min(ends)` moved out of the loop) raises "
            "ValueError on a system log with a timed record and no step_end yet (a run still starting, or killed "
            "in its start-up): the file is refused instead of read as a run without steps"),
]  # fmt: skip


@pytest.mark.parametrize(("rel", "change", "what"), KNOWN_RAISES)
def test_known_raises(rel: str, change: Callable[[bytes], bytes], what: str) -> None:
    """The property above, on the mutations found to break it (one real log, changed as ``what`` says): each is
    a reader bug, pinned xfail strict so that it turns red once fixed (then drop its entry from RAISES)."""
    log = _BY_REL[rel]
    m = Mutated(log, change(_raw(log)), (what,))
    assert m.handed
    _read(m.log, m.data)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_every_number_a_reader_makes_is_finite_and_every_event_keeps_the_contract(
    fmt: str, data: st.DataObject
) -> None:
    """Every number anywhere in an event (nested claims and hyperparameters too), an energy record or a profile
    is finite, and every event passes the contract's own check of an event line (``events.parse_line``, what the
    ingest's quarantine applies): a reader never hands the store an event it would quarantine."""
    m = data.draw(mutated(fmt))
    assume(m.handed)
    _assert_finite_and_kept(_parse(m))


def _assert_finite_and_kept(parsed: Parsed) -> None:
    for line, event in parsed.events:
        assert not _nonfinite(event), (
            f"line {line}: a number that is not finite: {_nonfinite(event)}\n{event}"
        )
        try:
            ev.parse_line(json.dumps(event, separators=(",", ":")))
        except ev.EventError as err:
            raise AssertionError(
                f"line {line}: an event the store would quarantine ({err}):\n{event}"
            ) from None
    for record in parsed.energy:
        assert not _nonfinite(record), f"an energy record with a number that is not finite: {record}"
    assert not _nonfinite(parsed.profile), f"a profile with a number that is not finite: {parsed.profile}"


def _pinned(case: str, rel: str, pattern: bytes, token: bytes, why: str) -> Any:
    """A real log with one value changed that a reader was found to mishandle: a strict xfail until ``case`` is
    in FIXED, then a plain test (for KNOWN_BREAKS and KNOWN_SILENT alike)."""
    if case in FIXED:
        return pytest.param(rel, pattern, token, id=case)
    return pytest.param(
        rel, pattern, token, id=case, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=why)
    )


KNOWN_BREAKS = [
    _pinned("megatron-elapsed", "megatron/megatron.log.gz",
            rb"iteration +50/.*?elapsed time per iteration \(ms\): (\S+) \|", b"-1",
            "megatron.py _steps takes `elapsed time per iteration (ms): -1` as is: t_total -0.005 s, an event "
            "the contract refuses (t_total >= 0), so the whole step is quarantined by the store"),
    _pinned("torchtitan-experiment-step-time", TITAN_EXPERIMENT,
            rb'"sum": ([^,]+), "weight": [^,]+, "key": "trainer_time/step_s", "step": 5,', b"-1",
            "torchtitan.py parse_experiment takes a trainer_time/step_s of -1 as is: t_total -1, refused by the "
            "contract (t_data, t_compute and t_optimizer alike)"),
    _pinned("torchtitan-system-step-span", TITAN_SL, rb'"step": 5, [^\n]*"step_end", [^\n]*"value": ([\d.]+)',
            b"-1", "torchtitan.py parse_system takes a step_end span of -1 ms as is: t_total -0.001, refused by "
                   "the contract (fetching_batch, fwd_bwd and optim spans alike; both layouts)"),
    _pinned("dllogger-epoch", "dllogger/dllogger.json", rb'"step": \[(\d+), 0\], "data": \{"train\.', b"-1",
            "dllogger.py _step takes the step key's epoch as is: a key [-1, 0] makes a step of epoch -1, refused by "
            "the contract (epoch >= 0), so the store quarantines the whole step"),
    _pinned("hf-eval-epoch", "hf-gpt2/trainer_state.json", rb'"epoch": ([\d.]+),\s+"eval_loss"', b"-1",
            "hf.py _evaluations took an entry's epoch as is: an epoch of -1 made an evaluation of epoch -1, refused "
            "by the contract (epoch >= 0); found by hypothesis in a clean clone's run"),
    _pinned("codecarbon-part-energy", "codecarbon/emissions.csv", rb"^2026-11-26T02:54:09,(?:[^,]*,){9}([^,]+),",
            b"1e308", "codecarbon.py _row checks each part's kWh (cpu/gpu/ram_energy) but not its joules: 1e308 kWh "
                      "of CPU lands as details.cpu_j = inf (written Infinity into the JSON column), beside a total "
                      "energy that does not hold it"),
]  # fmt: skip


@pytest.mark.parametrize(("rel", "pattern", "token"), KNOWN_BREAKS)
def test_known_contract_pinned(rel: str, pattern: bytes, token: bytes) -> None:
    """The property above, on the values found to break it (one real log, one value made -1 or 1e308): each is a
    reader bug, pinned xfail strict so that it turns red once fixed (then drop its entry from NOT_DRAWN)."""
    m, _ = _bad_number(rel, pattern, token)
    assert m.handed
    _assert_finite_and_kept(_read(m.log, m.data))


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_a_rate_is_never_a_quality_and_an_accuracy_lies_in_its_bounds(fmt: str, data: st.DataObject) -> None:
    """An ``eval`` event's metric is never one whose name says it is a rate or a time (``is_rate``: samples/s,
    ``*_runtime``, ``*_time``): a speed is no quality of the model; an accuracy-like metric (``quality_bounds``:
    accuracy, top1/top5, precision, recall, F1) and a step's or epoch's ``train_accuracy`` lie in [0, 1]."""
    m = data.draw(mutated(fmt))
    assume(m.handed)
    for line, event in _parse(m).events:
        qualities = []
        if event["kind"] == "eval":
            assert not is_rate(event["metric"]), f"line {line}: a rate or a time as a quality: {event}"
            qualities.append((event["metric"], event["value"]))
        if event.get("train_accuracy") is not None:
            qualities.append(("train_accuracy", event["train_accuracy"]))
        for metric, value in qualities:
            least, most = quality_bounds(metric)
            assert least is None or least <= value, f"line {line}: {metric} {value} below {least}: {event}"
            assert most is None or value <= most, f"line {line}: {metric} {value} above {most}: {event}"


# ---- 4: nothing lost in silence --------------------------------------------------------------------------------

# The readers whose events and energy records each name the line they came from, so that the changed field's
# line can be looked for in what the reader says: torchtitan's console, experiment metrics and system logs,
# Megatron-LM, Lightning, DLLogger (one record per line), CodeCarbon and sacct (a row per line). Not covered:
# Hugging Face's trainer_state.json (one JSON document: an entry spans lines and its events name the entry's
# "step" line, not the changed one) and Kineto traces (a profile, no line per step).
LINE_READERS = (
    "codecarbon",
    "dllogger",
    "lightning-metrics",
    "megatron-log",
    "slurm-sacct",
    "torchtitan-console",
    "torchtitan-experiment",
    "torchtitan-system",
)


@cache
def _unmutated_numbers(log: Log) -> Counter[tuple[Any, ...]]:
    return _numbers(_read(log, _raw(log)))


def _verbatim(parsed: Parsed) -> Counter[tuple[Any, ...]]:
    """Where the output holds a word as it was written (a free-text setting such as a Megatron-LM argument, which
    may be any string): the value is there, as the log gives it, not lost."""
    got: Counter[tuple[Any, ...]] = Counter()
    for _, event in parsed.events:
        got.update(
            (event["kind"], *p) for p, v in _leaves(event) if isinstance(v, str) and v.encode() in TOKENS
        )
    return got


def _lost_in_silence(m: Mutated, line: int) -> str | None:
    """What the reader lost of the unmutated log's output, in silence, when ``line`` was changed: a finite number
    of an event or energy record (counted by kind and field) that is gone, with no quarantined line ``line`` and no
    warning or note naming it; None when nothing is lost, or the loss is said."""
    parsed = _read(m.log, m.data)
    lost = _unmutated_numbers(m.log) - _numbers(parsed) - _verbatim(parsed)
    said = [*parsed.warnings, *parsed.notes]
    if not lost or line in {b.line for b in parsed.bad} or any(_names_line(s, line) for s in said):
        return None
    return (f"{m!r}: lost {dict(lost)} in silence (quarantined lines {sorted({b.line for b in parsed.bad})}; "
            f"warnings and notes: {said})")  # fmt: skip


# Readers found to lose a value in silence (each pinned below by a real log with one value changed, xfail strict:
# red once the reader is fixed, when the reader's case of the property is to be turned back on).
SILENT: dict[str, str] = {}


@pytest.mark.parametrize(
    "fmt",
    [pytest.param(f, marks=pytest.mark.xfail(strict=True, reason=f"loses values in silence: {SILENT[f]}")) if f in SILENT
     else f for f in LINE_READERS],
)  # fmt: skip
@FUZZ
@given(data=st.data())
def test_a_value_made_nan_inf_or_a_word_is_never_lost_in_silence(fmt: str, data: st.DataObject) -> None:
    """One number of one line of a real log made NaN, inf or a word: where that costs the reader's output a value
    it made of the unmutated log (a finite number of an event or an energy record, counted by kind and field: one
    fewer), the reader says so with the line: the line quarantined (``Parsed.bad``), or a warning or note naming
    it."""
    m, line = data.draw(one_bad_number(fmt))
    assume(m.handed)
    assert (lost := _lost_in_silence(m, line)) is None, lost


KNOWN_SILENT = [
    _pinned("megatron-lm-loss", "megatron/megatron.log.gz", rb"iteration +100/.*?\| lm loss: (\S+) \|", b"NAN",
            "megatron.py reads every `key: value` with number(): a NaN `lm loss` (what `{:E}` prints for a "
            "diverged loss) is dropped from the step, no quarantine, no warning"),
    _pinned("megatron-validation", "megatron/megatron.log.gz",
            rb"validation loss at iteration 50 \| lm loss value: (\S+) \|", b"nan",
            "megatron.py _evaluations: a NaN validation value is skipped (number() is None): the eval is gone, "
            "no quarantine, no warning"),
    _pinned("megatron-iteration", "megatron/megatron.log.gz", rb"^ \[[^]]+\] iteration +(50)/ +100 \|", b"oops",
            "megatron.py: an iteration line whose iteration is no number no longer matches _ITERATION and is "
            "counted as another line: its step event is gone in silence (the next line's covers its iterations)"),
    _pinned("torchtitan-console-loss", "torchtitan-console-r022.log.gz", rb"step: +1 .*?loss: +([\d.]+)", b"nan",
            "torchtitan.py _PAIR matches only [\\d.,]+ values: `loss: nan` (a diverged loss) leaves train_loss out "
            "of the step, no quarantine, no warning"),
    _pinned("torchtitan-console-config", "torchtitan-console-r022.log.gz",
            rb"^\[rank0\]:\[titan\] (\d+)-[^\n]*Building llama3 debugmodel ?with \{", b"NaN",
            "torchtitan.py: a line whose timestamp is unreadable is counted as another line; the `Building ... "
            "with {` line so lost loses the whole model configuration, and imported.unknown then says the version "
            "does not print it"),
    _pinned("torchtitan-console-step-time", "torchtitan-console-r022.log.gz",
            rb"^\[rank0\]:\[titan\] [\d-]+ (\d+):[^\n]* - INFO - \x1b\[31mstep: +5 ", b"nan",
            "torchtitan.py: a step line whose timestamp is unreadable is counted as another line: step 5's event "
            "is gone in silence (step 6's then covers 2 iterations)"),
    _pinned("torchtitan-console-trainer", "torchtitan-console-r022.log.gz",
            rb"global batch size \d+, gradient accumulation steps (\d+),", b"NaN",
            "torchtitan.py: a `Trainer is initialized with ...` line that _TRAINER does not match is ignored: the "
            "batch sizes and sequence length are gone, and with them every step's samples and tokens, in silence"),
    _pinned("torchtitan-console-params", "torchtitan-console-sl.log.gz", rb"size: ([\d,]+) total parameters",
            b"NaN", "torchtitan console.py: a `Model ... size: N total parameters` line _SIZE did not match was "
                    "skipped: run_start's params_total and params_active gone, no quarantine, no warning"),
    _pinned("torchtitan-console-peak", "torchtitan-console-r022.log.gz",
            rb"Peak FLOPS used for computing MFU: ([\d.e+]+)", b"nan",
            "torchtitan console.py: a peak FLOP/s that is no number made the line no match: MFU unknown in silence"),
    _pinned("torchtitan-experiment-step-time", TITAN_EXPERIMENT,
            rb'"sum": ([^,]+), "weight": [^,]+, "key": "trainer_time/step_s", "step": 5,', b"NaN",
            "torchtitan.py parse_experiment reads values with number(): a NaN trainer_time/step_s drops step 5's "
            "event in silence"),
    _pinned("torchtitan-system-step-span", TITAN_SL, rb'"step": 5, [^\n]*"step_end", [^\n]*"value": ([\d.]+)',
            b"NaN", "torchtitan.py parse_system: a step_end whose value is NaN is no span, so step 5's event is "
                    "dropped in silence"),
    _pinned("dllogger-batch-size", "dllogger/dllogger.json", rb'"PARAMETER", "data": \{[^\n]*"batch_size": (\d+)',
            b"NaN", "dllogger.py reads batch_size with count(): a NaN batch_size PARAMETER leaves every step's "
                    "samples (and the batch sizes) out, no quarantine, no warning (imported.unknown says there "
                    "is no batch_size parameter)"),
    _pinned("dllogger-summary", "dllogger/dllogger.json", rb'"step": \[\], "data": \{[^\n]*"val\.top1": ([\d.]+)',
            b"NaN", "dllogger.py: a NaN in the `[]` summary row is dropped from imported.summaries (finite_json), "
                    "no quarantine, no warning"),
    _pinned("sacct-start", "sacct/sacct-jobs.txt", rb"^1\|ok\|root\|(\d+)-", b"NaN",
            "sacct.py _time: a Start that is no time is read as Slurm's `Unknown` (None) in silence; the reader "
            "has no quarantine at all"),
]  # fmt: skip


@pytest.mark.parametrize(("rel", "pattern", "token"), KNOWN_SILENT)
def test_known_silent_losses(rel: str, pattern: bytes, token: bytes) -> None:
    """The property above, on the values it found lost in silence (one real log, one value made NaN or a word):
    each is a reader bug, pinned xfail strict so that it turns red once fixed."""
    m, line = _bad_number(rel, pattern, token)
    assert m.handed
    assert (lost := _lost_in_silence(m, line)) is None, lost


# ---- 5: each logged iteration is one step, on the unmutated logs -------------------------------------------------


def _text(log: Log) -> str:
    return _raw(log).decode("utf-8")


def _jsonl(log: Log) -> Iterator[dict[str, Any]]:
    for line in _text(log).splitlines():
        if line.strip():
            yield json.loads(line)


def _megatron_says(log: Log) -> tuple[int, int | None]:
    """The last iteration line's ``iteration N/`` and its ``consumed samples``."""
    *_, last = re.finditer(r"iteration\s+(\d+)/\s*\d+ \|.*?consumed samples:\s*(\d+)", _text(log))
    return int(last[1]), int(last[2])


def _console_says(log: Log) -> tuple[int, int | None]:
    """The last ``step: N`` of a run that starts at step 1, and N global batches (``global batch size B``)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", _text(log))
    assert re.search(r"Training starts at step 1\b", text)
    last = int(re.findall(r" - INFO - step:\s*(\d+)\s", text)[-1])
    gbs = re.search(r"global batch size (\d+)", text)
    assert gbs is not None
    return last, last * int(gbs[1])


def _experiment_says(log: Log) -> tuple[int, int | None]:
    """The last step with a ``trainer_time/step_s`` record (the file has no samples per step)."""
    return max(d["step"] for d in _jsonl(log) if d["key"] == "trainer_time/step_s"), None


def _system_says(log: Log) -> tuple[int, int | None]:
    """The last step with a ``step_end`` record, of either layout (samples: not in the file)."""
    steps = []
    for d in _jsonl(log):
        flat = {**d.get("int", {}), **d.get("normal", {}), **d} if "int" in d else d
        if flat.get("log_type_name") == "step_end":
            steps.append(flat["step"])
    return max(steps), None


def _dllogger_says(log: Log) -> tuple[int, int | None]:
    """The distinct ``[epoch, iteration]`` step keys of rows with ``train.*`` data, and that many batches of the
    ``batch_size`` parameter."""
    keys, batch = set(), None
    for line in _text(log).splitlines():
        rec = json.loads(line.removeprefix("DLLL "))
        if rec.get("step") == "PARAMETER":
            batch = rec["data"].get("batch_size", batch)
        elif (
            rec.get("type") == "LOG"
            and len(rec["step"]) == 2
            and any(k.startswith("train.") for k in rec["data"])
        ):
            keys.add(tuple(rec["step"]))
    return len(keys), len(keys) * batch if batch else None


def _expected(
    log: Log, iterations: Callable[[dict[str, Any]], int], samples: Callable[[dict[str, Any]], int]
) -> tuple[int, int | None]:
    said = json.loads((DATA / log.rel).with_name("expected.json").read_text())
    return iterations(said), samples(said)


def _dle_says(log: Log) -> tuple[int, int | None]:
    """DeepLearningExamples' ConvNets run: its script's own count (expected.json)."""
    return _expected(log, lambda d: d["iterations"], lambda d: d["samples_total"])


def _dle_pf20_says(log: Log) -> tuple[int, int | None]:
    """The same run logging every 20th iteration (``--print-freq 20``): the iterations and samples its logged rows
    stand for, as its script counted them (expected.json; an epoch's iterations after its last row are in none)."""
    return _expected(log, lambda d: d["logged_iterations"], lambda d: d["logged_samples"])


def _throughput_says(log: Log) -> tuple[int, int | None]:
    """Lightning with ThroughputMonitor: rank 0's batches and samples as its script counted them (expected.json);
    the log is rank 0's."""
    return _expected(log, lambda d: d["batches_per_rank"][0], lambda d: d["samples_per_rank"][0])


SAYS: list[tuple[Log, Callable[[Log], tuple[int, int | None]]]] = [
    (_BY_REL["megatron/megatron.log.gz"], _megatron_says),
    (_BY_REL["torchtitan-console-r022.log.gz"], _console_says),
    (_BY_REL["torchtitan-console-sl.log.gz"], _console_says),
    (_BY_REL[TITAN_EXPERIMENT], _experiment_says),
    (_BY_REL["torchtitan-obs/system_logs/trainer_rank_0_system.jsonl.gz"], _system_says),
    (_BY_REL[TITAN_SL], _system_says),
    (_BY_REL["dllogger/dllogger.json"], _dllogger_says),
    (_BY_REL["dllogger-dle/dllogger.json"], _dle_says),
    (_BY_REL["dllogger-dle-pf20/dllogger.json"], _dle_pf20_says),
    (_BY_REL["lightning-throughput/metrics.csv"], _throughput_says),
]
# Not here: logs with no step time, whose readers make no step event by design: torchtitan's aggregator console
# (torchtitan-console-obs: its timestamps are the aggregator's, no step's), Hugging Face's trainer_state.json and
# Lightning without ThroughputMonitor (no time in the file); CodeCarbon, sacct and Kineto traces make no run.


@pytest.mark.parametrize(("log", "says"), SAYS, ids=[log.rel.split("/")[0] for log, _ in SAYS])
def test_each_logged_iteration_is_one_step_and_the_samples_add_up(
    log: Log, says: Callable[[Log], tuple[int, int | None]]
) -> None:
    """On the unmutated real log, the step events' ``iterations`` (1 where absent) add up to the iterations the
    log says it trained, and their ``samples`` to the samples it says (where it says them): no iteration counted
    twice or lost, however many one logged line stands for."""
    iterations, samples = says(log)
    steps = [e for _, e in _read(log, _raw(log)).events if e["kind"] == "step"]
    assert sum(e.get("iterations") or 1 for e in steps) == iterations
    if samples is not None:
        assert sum(e.get("samples") or 0 for e in steps) == samples
        assert all(e.get("samples") is not None for e in steps), (
            "a step whose samples the log says, without them"
        )


def test_every_reader_is_fed_a_real_log() -> None:
    """The properties above hold for every reader: each has at least one real log among the inputs."""
    assert {log.format for log in LOGS} == set(importers.FORMATS)
    assert all((DATA / log.rel).is_file() for log in LOGS)


@pytest.mark.parametrize("log", LOGS, ids=repr)
def test_every_real_log_is_read_as_its_format(log: Log) -> None:
    """The unmutated inputs are what their readers are for: each sniffs as its format (the ingest picks the reader
    by content) and yields something (events, energy records or profiled steps), so that the mutations start
    from a log the reader reads."""
    data = _raw(log)
    assert importers.FORMATS[log.format].sniff(DATA / log.rel, data[: 1 << 20])
    parsed = _read(log, data)
    assert parsed.events or parsed.energy or (parsed.profile and parsed.profile["steps"]), parsed.warnings
    assert not parsed.bad, parsed.bad


def test_every_known_bug_is_pinned() -> None:
    """Each reader left out of a property, or spared a token, because of a known bug has its bug pinned by a strict
    xfail (so that fixing it turns a test red, and the reader is put back)."""

    def formats(cases: list[Any]) -> set[str]:
        return {_BY_REL[case.values[0]].format for case in cases}

    assert set(SILENT) <= formats(KNOWN_SILENT)
    assert set(NOT_DRAWN) <= formats(KNOWN_BREAKS)
    assert set(RAISES) <= formats(KNOWN_RAISES)

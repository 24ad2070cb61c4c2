"""A property-based fuzzer over what the collector reads (issue 18): event lines and MLPerf result logs.

Whatever the lines, ingesting never raises; every line is either stored, quarantined with the contract's own
reason, or a counted duplicate; the collector's fast (SQL) validator agrees with the contract's Python validator
line by line; and what the MLPerf reader makes of a log is always a valid event. The number of examples is
bounded (``HONESTSCALE_FUZZ_EXAMPLES``, 60 by default) so CI spends a fixed time here.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from honestscale import events as ev
from honestscale.collector import _mlperf
from honestscale.collector._sources import discover
from honestscale.collector.ingest import Ingester
from honestscale.store import open_store
from tests.conftest import mlperf_root

EXAMPLES = int(os.environ.get("HONESTSCALE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# JSON values, including the awkward ones: integers past 64 bits, floats at the edges, control characters,
# lone surrogates (escaped in JSON), nested objects and arrays.
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, 2**63, 2**64, 1e308, -1e-308, 0.5, 1e20]),
    st.text(max_size=12),
    st.sampled_from(["", " ", "\x00", "\u2028", "\ud800", "NaN", "1", "true", "success", "step", "torch"]),
)
JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _valid_value(f: ev.Field) -> st.SearchStrategy[Any]:
    if f.enum is not None:
        return st.sampled_from(f.enum)
    low = int(f.minimum) if f.minimum is not None else -(2**40)
    return {
        "string": st.text(max_size=10),
        "integer": st.integers(min_value=low, max_value=2**40),
        "number": st.floats(min_value=f.minimum, max_value=1e9, allow_nan=False)
        if f.minimum is not None
        else st.floats(min_value=-1e9, max_value=1e9, allow_nan=False),
        "boolean": st.booleans(),
        "object": st.dictionaries(st.text(max_size=5), _LEAF, max_size=2),
        "array": st.lists(st.integers(0, 512), max_size=3),
    }[f.type]


@st.composite
def event_line(draw: st.DrawFn, seq: int) -> str:
    """A valid event of a random kind, then (mostly) one mutation of it; or a line that is not JSON at all."""
    kind = draw(st.sampled_from(ev.KINDS))
    event: dict[str, Any] = {
        "schema": 1,
        "run_id": "fz",
        "rank": 0,
        "seq": seq,
        "time": 1.7e9 + seq,
        "kind": kind,
    }
    for f in ev.fields_of(kind):
        if f.name in event:
            continue
        if f.required or draw(st.booleans()):
            event[f.name] = draw(_valid_value(f))
    mutation = draw(
        st.sampled_from(
            ["none", "drop", "retype", "null", "extra", "text", "cut", "dup-key", "nonfinite", "huge"]
        )
    )
    names = sorted(event)
    if mutation == "drop":
        del event[draw(st.sampled_from(names))]
    elif mutation == "retype":
        event[draw(st.sampled_from(names))] = draw(JSON)
    elif mutation == "null":
        event[draw(st.sampled_from(names))] = None
    elif mutation == "extra":
        event[draw(st.text(min_size=1, max_size=8))] = draw(JSON)
    line = json.dumps(event, ensure_ascii=draw(st.booleans()))
    if mutation == "text":
        return draw(st.text(max_size=40).filter(lambda t: "\n" not in t and "\r" not in t))
    if mutation == "cut":
        return line[: draw(st.integers(0, max(0, len(line) - 1)))]
    if mutation == "nonfinite":  # NaN, Infinity, 1e400: in a field of the contract, or in one outside it
        name = draw(st.sampled_from([*names, "loss"]))
        token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]))
        if name == "loss":
            return line[:-1] + f', "loss": {token}' + "}"
        return _swap(line, name, token)
    if mutation == "huge":  # integers at and past the 64 bits the store keeps, and past a rank's 32
        name = draw(st.sampled_from(names))
        value = draw(
            st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**30])
        )
        return _swap(line, name, str(value))
    if mutation == "dup-key":  # JSON with a key twice: the contract reads the last one, and so must the store
        name = draw(st.sampled_from(names))
        return line[:-1] + f", {json.dumps(name)}: {json.dumps(draw(JSON))}" + "}"
    return line


def _swap(line: str, name: str, token: str) -> str:
    """``line`` with the value of its field ``name`` written as ``token`` (raw JSON text)."""
    event = json.loads(line)
    marker = "\u0000swap\u0000"
    event[name] = marker
    return json.dumps(event).replace(json.dumps(marker), token)


@st.composite
def event_file(draw: st.DrawFn) -> list[str]:
    n = draw(st.integers(1, 12))
    lines = [draw(event_line(seq)) for seq in range(n)]
    if draw(st.booleans()):  # a line repeated as is (a duplicate) or a seq reused (a conflict)
        lines.append(lines[draw(st.integers(0, n - 1))])
    return lines


def _ingest(lines: list[str], workdir: Path) -> tuple[dict[int, str], dict[int, str], int]:
    """(line -> stored kind, line -> quarantine reason, duplicates) of a file of ``lines``."""
    path = workdir / "fz" / "events-rank0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass"))
    con = open_store(workdir / "s.duckdb")
    try:
        summary = Ingester(con).ingest(discover([str(path)]).sources)
        stored = dict(con.execute("SELECT line, kind FROM events").fetchall())
        quarantined = dict(con.execute("SELECT line, reason FROM quarantine").fetchall())
    finally:
        con.close()
    return stored, quarantined, summary.duplicates


def _contract(raw: str) -> str | None:
    """The contract's verdict on one line: None when it is an event, else the reason."""
    try:
        ev.parse_line(raw.encode("utf-8", "surrogatepass"))
    except ev.EventError as err:
        return str(err)
    return None


@FUZZ
@given(event_file())
def test_every_event_line_is_stored_or_quarantined_as_the_contract_says(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stored, quarantined, duplicates = _ingest(lines, Path(tmp))
    assert not set(stored) & set(quarantined)
    blank = {n for n, raw in enumerate(lines, start=1) if not raw.strip()}
    unaccounted = set(range(1, len(lines) + 1)) - set(stored) - set(quarantined) - blank
    assert len(unaccounted) == duplicates, (unaccounted, duplicates)
    for number, raw in enumerate(lines, start=1):
        verdict = _contract(raw)
        if number in stored:
            assert verdict is None, f"line {number} stored, but the contract rejects it: {verdict}\n{raw}"
        elif number in quarantined:
            reason = quarantined[number]
            assert "please report" not in reason, f"the fast validator disagrees with the contract:\n{raw}"
            if verdict is not None:
                assert reason == verdict
            else:  # a valid event held back only when its (run_id, rank, seq) is taken by another line
                assert reason.startswith(("conflict", "held back")), reason
        elif number in unaccounted:
            assert (
                verdict is None and raw in lines[: number - 1]
            )  # a byte-identical repeat of an earlier line


# MLPerf logs are written by Python's json module: NaN and Infinity do occur (a diverged run's accuracy)
MLPERF_VALUE = st.one_of(JSON, st.sampled_from([math.nan, math.inf, -math.inf, True, False, 0, -1, 2**64]))
LOG = mlperf_root() / "DellEMC" / "results" / "2xC4140" / "resnet" / "result_0.txt"


def _mllog_lines() -> list[str]:
    return [line for line in LOG.read_text(encoding="utf-8").splitlines() if ":::MLLOG" in line]


@st.composite
def mlperf_log(draw: st.DrawFn) -> str:
    """A real MLPerf result log with some of its records mutated, dropped, repeated or replaced."""
    real = _mllog_lines()
    out: list[str] = []
    for line in real:
        action = draw(
            st.sampled_from(["keep"] * 12 + ["drop", "value", "key", "time", "cut", "garbage", "twice"])
        )
        if action == "drop":
            continue
        if action in ("value", "key", "time"):
            prefix, body = line.split(":::MLLOG", 1)
            rec = json.loads(body)
            rec[{"value": "value", "key": "key", "time": "time_ms"}[action]] = draw(MLPERF_VALUE)
            line = f"{prefix}:::MLLOG {json.dumps(rec)}"
        elif action == "cut":
            line = line[: draw(st.integers(0, len(line)))]
        elif action == "garbage":
            line = ":::MLLOG " + draw(st.text(max_size=30).filter(lambda t: "\n" not in t and "\r" not in t))
        elif action == "twice":
            out.append(line)
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.usefixtures("mlperf")  # skipped where the MLPerf logs are absent, never in CI
@FUZZ
@given(mlperf_log())
def test_an_mlperf_log_however_damaged_gives_valid_events_or_named_bad_lines(text: str) -> None:
    parsed = _mlperf.parse(LOG, text)
    mllog = {n for n, line in enumerate(text.split("\n"), start=1) if ":::MLLOG" in line}
    bad = {b.line for b in parsed.bad}
    assert bad <= mllog and all(b.reason for b in parsed.bad)
    for number, event in parsed.events:
        assert number in mllog and number not in bad
        ev.validate(event)  # what the reader makes of a log always keeps the contract
        assert all(math.isfinite(v) for v in event.values() if isinstance(v, float)), (
            f"a non-finite number from line {number}: {event}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "results" / "2xC4140" / "resnet" / "result_0.txt"
        copy.parent.mkdir(parents=True)
        copy.write_text(text, encoding="utf-8", errors="surrogatepass")
        con = open_store(Path(tmp) / "s.duckdb")
        try:
            summary = Ingester(con).ingest(discover([str(copy)]).sources)
            reasons = [r[0] for r in con.execute("SELECT reason FROM quarantine").fetchall()]
        finally:
            con.close()
    # every quarantined line is one the reader named bad: none of the events it made was refused by the store
    assert summary.quarantined == len(bad), reasons


def test_a_count_past_its_column_is_quarantined_not_a_crashed_batch(tmp_path: Path) -> None:
    """Found by the fuzzer: ``iterations`` of 2**31 passed both validators and crashed the batch's insert into the
    32-bit column; the contract's maximum now quarantines it, with the field named."""
    line = ('{"schema": 1, "run_id": "fz", "rank": 0, "seq": 0, "time": 1700000000.0, "kind": "step", "step": 0, '
            '"samples": 0, "t_total": 0.0, "iterations": 2147483648}')  # fmt: skip
    stored, quarantined, _ = _ingest([line], tmp_path)
    assert stored == {} and list(quarantined) == [1] and "iterations" in quarantined[1], quarantined

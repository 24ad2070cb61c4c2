"""The event contract: writer, validator, JSON Schema and docs, all from one field table."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from honestscale import events as ev
from tests.conftest import REPO


def _good(kind: str) -> dict[str, Any]:
    base: dict[str, Any] = {"schema": 1, "run_id": "r1", "rank": 0, "seq": 0, "time": 1.7e9, "kind": kind}
    extra: dict[str, dict[str, Any]] = {
        "run_start": {"framework": "torch", "world_size": 2},
        "step": {"step": 0, "samples": 32, "t_total": 0.01},
        "epoch": {"epoch": 0},
        "eval": {"split": "test", "metric": "accuracy", "value": 0.9},
        "system": {},
        "run_stop": {"status": "success"},
    }
    return base | extra[kind]


def test_writer_appends_one_flushed_line_per_event(tmp_path: Path) -> None:
    w = ev.EventWriter(tmp_path, "run-a", rank=3)
    assert w.path == tmp_path / "run-a" / "events-rank3.jsonl"
    w.run_start(framework="torch", world_size=4)
    # Readable before close: each event reached the file when emit returned.
    first = w.path.read_text().splitlines()
    assert len(first) == 1 and json.loads(first[0])["kind"] == "run_start"
    w.step(step=0, samples=8, t_total=0.5, t_data=0.1)
    lines = [json.loads(x) for x in w.path.read_text().splitlines()]
    assert [e["seq"] for e in lines] == [0, 1]
    assert all(e["rank"] == 3 and e["run_id"] == "run-a" and e["schema"] == ev.SCHEMA_VERSION for e in lines)
    w.close()


def test_reopening_continues_seq(tmp_path: Path) -> None:
    with ev.EventWriter(tmp_path, "r", 0) as w:
        w.run_start(framework="torch", world_size=1)
        w.epoch(epoch=0)
    with ev.EventWriter(tmp_path, "r", 0) as w:
        assert w.next_seq == 2
        w.run_stop("success")
    assert [e["seq"] for _, e in ev.read_events(ev.event_path(tmp_path, "r", 0))] == [0, 1, 2]  # type: ignore[index]


def test_sampler_thread_and_training_loop_never_share_a_seq(tmp_path: Path) -> None:
    w = ev.EventWriter(tmp_path, "r", 0)

    def sampler() -> None:
        for _ in range(2000):
            w.system(cpu_percent=50.0)

    t = threading.Thread(target=sampler)
    t.start()
    for i in range(2000):
        w.step(step=i, samples=1, t_total=0.001)
    t.join()
    w.close()
    seqs = [json.loads(x)["seq"] for x in w.path.read_text().splitlines()]
    assert sorted(seqs) == list(range(4000))


def test_exception_in_block_writes_failed_run_stop(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), ev.EventWriter(tmp_path, "r", 0) as w:
        w.run_start(framework="torch", world_size=1)
        raise RuntimeError("CUDA out of memory")
    last = json.loads(w.path.read_text().splitlines()[-1])
    assert last["kind"] == "run_stop" and last["status"] == "failed"
    assert "CUDA out of memory" in last["reason"]


def test_non_finite_numbers_become_null(tmp_path: Path) -> None:
    with ev.EventWriter(tmp_path, "r", 0) as w:
        w.epoch(epoch=1, train_loss=float("nan"))
    line = w.path.read_text()
    assert "NaN" not in line and json.loads(line)["train_loss"] is None


def test_writer_refuses_invalid_events(tmp_path: Path) -> None:
    with ev.EventWriter(tmp_path, "r", 0) as w:
        with pytest.raises(ev.EventError, match="status"):
            w.run_stop("finished")
        with pytest.raises(ev.EventError, match="world_size"):
            w.run_start(framework="torch")
    assert w.path.read_text() == ""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rank": "0"}, "field 'rank' must be integer, got string"),
        ({"rank": True}, "field 'rank' must be integer, got boolean"),
        ({"rank": -1}, "'rank' is -1, must be >= 0"),
        ({"seq": None}, "required field 'seq' is null"),
        ({"time": "now"}, "field 'time' must be number"),
        ({"kind": "checkpoint"}, "'kind': 'checkpoint' is not one of"),
        (
            {"schema": ev.SCHEMA_VERSION + 1},
            f"event schema {ev.SCHEMA_VERSION + 1} is newer than this honestscale",
        ),
        ({"schema": 0}, "'schema' is 0, must be >= 1"),
        ({"split": "val"}, "'split' is 'val', expected one of train, validation, test"),
        ({"value": "0.9"}, "'value' must be number"),
    ],
)
def test_validate_names_the_field(change: dict[str, Any], message: str) -> None:
    event = _good("eval") | change
    with pytest.raises(ev.EventError, match=message.replace("(", r"\(")):
        ev.validate(event)


def test_validate_missing_field_and_non_events() -> None:
    e = _good("step")
    del e["t_total"]
    with pytest.raises(ev.EventError, match="required field 't_total' is missing"):
        ev.validate(e)
    e = _good("step")
    del e["samples"]
    with pytest.raises(ev.EventError, match="required field 'samples' is missing in contract version 1"):
        ev.validate(e)
    ev.validate(
        e | {"schema": 4}
    )  # since contract 4: a step of another tool's log that does not count samples
    with pytest.raises(ev.EventError, match="not an event: a JSON array"):
        ev.validate([1, 2])
    with pytest.raises(ev.EventError, match="not a honestscale event"):
        ev.validate({"name": "resnet", "accuracy": 0.76})
    with pytest.raises(ev.EventError, match="not JSON"):
        ev.parse_line('{"schema": 1, "run_')
    with pytest.raises(ev.EventError, match="not UTF-8"):
        ev.parse_line(b"\xff\xfe\x00garbage")


def test_lines_that_readers_would_read_differently_are_refused() -> None:
    """What the store's reader (DuckDB) and Python's would decode differently is not an event (issue 18)."""
    line = json.dumps(_good("epoch"))
    with pytest.raises(ev.EventError, match="field 'epoch' appears twice"):
        ev.parse_line(line[:-1] + ', "epoch": null}')
    with pytest.raises(ev.EventError, match=r"\\ud800 is half of a surrogate pair"):
        ev.parse_line(line[:-1] + ', "note": "\\ud800"}')
    assert ev.parse_line(line[:-1] + ', "note": "\\ud83d\\ude00"}')["note"] == "\U0001f600"  # a whole pair
    with pytest.raises(ev.EventError, match="beyond the 64-bit integers"):
        ev.validate(_good("step") | {"seq": 2**63})
    with pytest.raises(ev.EventError, match="'rank' is 2147483648, must be <= 2147483647"):
        ev.validate(_good("step") | {"rank": 2**31})
    with pytest.raises(ev.EventError, match="'t_total' is not a finite number"):
        ev.parse_line(line.replace('"kind": "epoch"', '"kind": "epoch", "t_total": 1e400'))
    outside = ev.parse_line(line[:-1] + ', "loss": NaN}')  # not a field of the contract: kept as read
    assert isinstance(outside["loss"], float) and math.isnan(outside["loss"])


def test_extra_fields_are_allowed() -> None:
    assert ev.validate(_good("step") | {"gpu_temp_c": 71})["gpu_temp_c"] == 71


def test_json_schema_file_is_generated_from_the_field_tables() -> None:
    shipped = json.loads((REPO / "honestscale" / "event_schema.json").read_text())
    assert shipped == ev.json_schema(), (
        "regenerate: honestscale contract --json-schema > honestscale/event_schema.json"
    )


def test_json_schema_agrees_with_the_validator(tmp_path: Path) -> None:
    schema = ev.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for kind in ev.KINDS:
        validator.validate(_good(kind))
    bad = [
        _good("eval") | {"split": "val"},
        _good("step") | {"samples": -1},
        _good("run_stop") | {"status": None},
    ]
    for event in bad:
        assert not validator.is_valid(event)
        with pytest.raises(ev.EventError):
            ev.validate(event)


def test_docs_are_generated_from_the_field_tables() -> None:
    assert (REPO / "docs" / "events.md").read_text() == ev.markdown_reference() + "\n", (
        "regenerate: honestscale contract --markdown > docs/events.md"
    )


def test_event_module_imports_only_the_standard_library() -> None:
    code = (
        "import sys; import honestscale.events; "
        "print('\\n'.join(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names))))"
    )
    # -S: no site-packages at all, as in a framework environment without honestscale's dependencies.
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert set(out.stdout.split()) <= {"honestscale", "__main__"}, out.stdout


def test_each_kind_has_a_typed_record_equal_to_its_field_table() -> None:
    """event_records types what the field tables say: the same names, the same required ones, the JSON type of
    each (a field added to a table and not to its record, or typed otherwise, fails here)."""
    import typing

    from honestscale import event_records as rec

    json_type = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        dict: "object",
        list: "array",
    }
    records: dict[str, Any] = {"run_start": rec.RunStartFields, "step": rec.StepFields, "epoch": rec.EpochFields,
               "eval": rec.EvalFields, "system": rec.SystemFields, "run_stop": rec.RunStopFields}  # fmt: skip
    assert set(records) == set(ev.KINDS)
    for kind, record in records.items():
        fields = {f.name: f for f in ev.KIND_FIELDS[kind]}
        hints = typing.get_type_hints(record)
        assert list(hints) == list(fields), kind
        assert record.__required_keys__ == {n for n, f in fields.items() if f.required}, kind
        for name, hint in hints.items():
            kinds = {typing.get_origin(a) or a for a in typing.get_args(hint) or (hint,)} - {type(None)}
            assert {json_type[k] for k in kinds} == {fields[name].type}, (kind, name, hint)
    envelope = typing.get_type_hints(rec.Envelope)
    assert set(envelope) | {"kind"} == {f.name for f in ev.COMMON}

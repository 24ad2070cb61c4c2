"""Landing event lines in the store: validation and inserts in DuckDB, with the contract module as judge.

The fast path runs in SQL, vectorised: each line's JSON types are read as a signature
(one entry per field of its kind) and checked in Python once per *distinct* signature
against the contract's field tables; enum and minimum checks are SQL predicates generated
from the same tables. Lines the fast path rejects go to :func:`events.parse_line`, whose
message becomes the quarantine reason, so the reasons come from one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from honestscale.runners import events as ev

TYPED_TABLES = {"step": "steps", "epoch": "epochs", "eval": "evals", "system": "system_samples"}

_DUCK_TYPE = {
    "string": "VARCHAR",
    "integer": "BIGINT",
    "number": "DOUBLE",
    "boolean": "BOOLEAN",
    "object": "JSON",
    "array": "JSON",
}
_JSON_TYPES_OK = {
    "string": {"VARCHAR"},
    "integer": {"BIGINT", "UBIGINT"},
    "number": {"BIGINT", "UBIGINT", "DOUBLE"},
    "boolean": {"BOOLEAN"},
    "object": {"OBJECT"},
    "array": {"ARRAY"},
}
_ABSENT = "-"


@dataclass
class Rejected:
    line: int
    raw: str
    reason: str


@dataclass
class Landed:
    events: int = 0
    duplicates: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    run_ids: set[str] = field(default_factory=set)


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _kind_sql(kind: str) -> tuple[str, str, str]:
    """(json paths list, json_transform structure, value predicate) for ``kind``."""
    fields = ev.fields_of(kind)
    paths = "[" + ", ".join(_sql_str(f"$.{f.name}") for f in fields) + "]"
    structure = json.dumps({f.name: _DUCK_TYPE[f.type] for f in fields})
    conds = [f"j.schema = {ev.SCHEMA_VERSION}"]
    for f in fields:
        col = f'j."{f.name}"'
        if f.enum is not None and f.name != "kind":
            conds.append(f"({col} IS NULL OR {col} IN ({', '.join(map(_sql_str, f.enum))}))")
        if f.minimum is not None:
            conds.append(f"({col} IS NULL OR {col} >= {f.minimum!r})")
    return paths, _sql_str(structure), " AND ".join(conds)


_KIND_SQL = {kind: _kind_sql(kind) for kind in ev.KINDS}


def signature_ok(kind: str, signature: str) -> bool:
    """Whether JSON types ``signature`` (DuckDB json_type per field, '-' if absent) fit ``kind``'s fields."""
    types = signature.split(",")
    fields = ev.fields_of(kind)
    if len(types) != len(fields):
        return False
    for f, t in zip(fields, types, strict=True):
        if t in (_ABSENT, "NULL"):
            if f.required:
                return False
        elif t not in _JSON_TYPES_OK[f.type]:
            return False
    return True


def _known_present(signature: str) -> int:
    return sum(1 for t in signature.split(",") if t != _ABSENT)


def land_lines(con: duckdb.DuckDBPyConnection, file_id: int, numbers: list[int], lines: list[str]) -> Landed:
    """Validate ``lines`` (numbered ``numbers``), insert the new events, return what landed and what not.

    Runs inside the caller's transaction. Events already in the store (same run, rank,
    seq), or repeated within ``lines``, count as duplicates and are not inserted again.
    """
    out = Landed()
    if not lines:
        return out
    con.register(
        "_in", pa.table({"line": pa.array(numbers, pa.int64()), "raw": pa.array(lines, pa.string())})
    )
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _stage AS "
            "SELECT line, raw, CASE WHEN json_valid(raw) THEN raw ->> '$.kind' END AS kind FROM _in"
        )
    finally:
        con.unregister("_in")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _acc (line BIGINT, run_id VARCHAR, rank INTEGER, seq BIGINT, "
        "time DOUBLE, kind VARCHAR, payload JSON)"
    )
    present = [
        r[0] for r in con.execute("SELECT DISTINCT kind FROM _stage WHERE kind IS NOT NULL").fetchall()
    ]
    kinds = [k for k in ev.KINDS if k in present]
    for kind in kinds:
        paths, structure, predicate = _KIND_SQL[kind]
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _k_{kind} AS SELECT line, raw, "
            f"array_to_string(list_transform(json_type(raw, {paths}), lambda x: coalesce(x, '{_ABSENT}')), ',') AS sig, "
            f"len(json_keys(raw)) AS nkeys, json_transform(raw, {structure}) AS j "
            "FROM _stage WHERE kind = ?",
            [kind],
        )
        good = [
            (sig, nkeys, kind in ("run_start", "run_stop") or nkeys > _known_present(sig))
            for sig, nkeys in con.execute(f"SELECT DISTINCT sig, nkeys FROM _k_{kind}").fetchall()
            if signature_ok(kind, sig)
        ]
        if not good:
            continue
        con.register(
            "_good",
            pa.table(
                {
                    "sig": pa.array([g[0] for g in good], pa.string()),
                    "nkeys": pa.array([g[1] for g in good], pa.int64()),
                    "keep": pa.array([g[2] for g in good], pa.bool_()),
                }
            ),
        )
        try:
            con.execute(
                f"INSERT INTO _acc SELECT k.line, k.j.run_id, k.j.rank, k.j.seq, k.j.time, '{kind}', "
                f"CASE WHEN g.keep THEN k.raw END FROM _k_{kind} k JOIN _good g USING (sig, nkeys) WHERE {predicate}"
            )
        finally:
            con.unregister("_good")

    for line, raw in con.execute(
        "SELECT line, raw FROM _stage ANTI JOIN _acc USING (line) ORDER BY line"
    ).fetchall():
        try:
            ev.parse_line(raw)
            reason = (
                "rejected by the collector's fast validator though the contract accepts it: please report"
            )
        except ev.EventError as err:
            reason = str(err)
        out.rejected.append(Rejected(int(line), raw, reason))

    con.execute(
        "CREATE OR REPLACE TEMP TABLE _new AS SELECT a.* FROM _acc a "
        "WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id = a.run_id AND e.rank = a.rank AND e.seq = a.seq) "
        "QUALIFY row_number() OVER (PARTITION BY a.run_id, a.rank, a.seq ORDER BY a.line) = 1"
    )
    counts = con.execute("SELECT (SELECT count(*) FROM _acc), (SELECT count(*) FROM _new)").fetchall()[0]
    assert counts is not None
    accepted, new = int(counts[0]), int(counts[1])
    out.events, out.duplicates = new, accepted - new
    if new:
        con.execute(
            "INSERT INTO events SELECT run_id, rank, seq, time, kind, ?, line, payload FROM _new", [file_id]
        )
        for kind in kinds:
            table = TYPED_TABLES.get(kind)
            if table is None:
                continue
            names = [f.name for f in ev.KIND_FIELDS[kind]]
            cols = ", ".join(f'"{n}"' for n in names)
            vals = ", ".join(f'k.j."{n}"' for n in names)
            con.execute(
                f"INSERT INTO {table} (run_id, rank, seq, time, {cols}) "
                f"SELECT k.j.run_id, k.j.rank, k.j.seq, k.j.time, {vals} FROM _k_{kind} k SEMI JOIN _new n USING (line)"
            )
        out.run_ids = {r[0] for r in con.execute("SELECT DISTINCT run_id FROM _new").fetchall()}
    for kind in kinds:
        con.execute(f"DROP TABLE IF EXISTS _k_{kind}")
    con.execute("DROP TABLE IF EXISTS _new; DROP TABLE IF EXISTS _acc; DROP TABLE IF EXISTS _stage")
    return out

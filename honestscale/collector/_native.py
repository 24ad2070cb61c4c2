"""Landing event lines in the store: validation and inserts in DuckDB, with the contract module as judge.

The fast path runs in SQL, vectorised over a batch of files: each line's JSON types are
read as a signature (one entry per field of its kind) and checked in Python once per
*distinct* signature against the contract's field tables; enum and minimum checks are SQL predicates generated
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


@dataclass
class Rejected:
    line: int
    raw: str
    reason: str


@dataclass
class Landed:
    events: int = 0
    duplicates: int = 0
    run_ids: set[str] = field(default_factory=set)


class Batch:
    """Lines of several files to validate together, as Arrow arrays (no per-line Python work)."""

    def __init__(self) -> None:
        self.items: list[pa.RecordBatch] = []

    def add(self, file_id: int, first_number: int, lines: list[str | None]) -> None:
        """Consecutive lines from ``first_number``; None (not UTF-8) and blank lines are skipped."""
        n = len(lines)
        self.items.append(
            pa.record_batch(
                [
                    pa.repeat(pa.scalar(file_id, pa.int32()), n),
                    pa.array(range(first_number, first_number + n), pa.int64()),
                    pa.array(lines, pa.string()),
                ],
                names=["file_id", "line", "raw"],
            )
        )

    def add_numbered(self, file_id: int, numbered: list[tuple[int, str]]) -> None:
        self.items.append(
            pa.record_batch(
                [
                    pa.repeat(pa.scalar(file_id, pa.int32()), len(numbered)),
                    pa.array([n for n, _ in numbered], pa.int64()),
                    pa.array([t for _, t in numbered], pa.string()),
                ],
                names=["file_id", "line", "raw"],
            )
        )


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


def signature_ok(kind: str, types: list[str | None]) -> bool:
    """Whether the JSON types of an event's fields (DuckDB json_type, None if absent) fit ``kind``."""
    fields = ev.fields_of(kind)
    if len(types) != len(fields):
        return False
    for f, t in zip(fields, types, strict=True):
        if t is None or t == "NULL":
            if f.required:
                return False
        elif t not in _JSON_TYPES_OK[f.type]:
            return False
    return True


def _sql_list(values: list[str]) -> str:
    return "(" + ", ".join(map(_sql_str, values)) + ")"


class Stage:
    """Validated lines of a batch of files, held in temp tables until each file commits.

    :meth:`validate` parses and checks every line of the batch in a few vectorised queries
    (over all files at once, so DuckDB uses every core); :meth:`land` then inserts one
    file's new events inside that file's transaction. Temp tables are private to the
    connection and never reach the store file.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.kinds: list[str] = []

    def validate(self, batch: Batch) -> dict[int, list[Rejected]]:
        """Check every line; return the rejected ones per file, with the contract's reason."""
        con = self.con
        con.register("_in", pa.Table.from_batches(batch.items))
        try:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _stage AS SELECT file_id, line, raw, "
                "CASE WHEN json_valid(raw) THEN raw ->> '$.kind' END AS kind FROM _in "
                "WHERE length(raw) > 0"
            )
        finally:
            con.unregister("_in")
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _acc (file_id INTEGER, line BIGINT, run_id VARCHAR, rank INTEGER, "
            "seq BIGINT, time DOUBLE, kind VARCHAR, payload JSON)"
        )
        present = {r[0] for r in con.execute("SELECT DISTINCT kind FROM _stage").fetchall()}
        self.kinds = [k for k in ev.KINDS if k in present]
        for kind in self.kinds:
            self._validate_kind(kind)
        rejected: dict[int, list[Rejected]] = {}
        for file_id, line, raw in con.execute(
            "SELECT file_id, line, raw FROM _stage ANTI JOIN _acc USING (file_id, line) ORDER BY file_id, line"
        ).fetchall():
            if not raw.strip():
                continue  # a blank line carries nothing
            try:
                ev.parse_line(raw)
                reason = (
                    "rejected by the collector's fast validator though the contract accepts it: please report"
                )
            except ev.EventError as err:
                reason = str(err)
            rejected.setdefault(int(file_id), []).append(Rejected(int(line), raw, reason))
        con.execute("DROP TABLE _stage")
        return rejected

    def _validate_kind(self, kind: str) -> None:
        con = self.con
        paths, structure, predicate = _KIND_SQL[kind]
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _k_{kind} AS SELECT file_id, line, "
            f"hash(json_type(raw, {paths})) AS sig, len(json_keys(raw)) AS nkeys, "
            f"json_transform(raw, {structure}) AS j FROM _stage WHERE kind = ?",
            [kind],
        )
        # One representative line per distinct (signature, key count): judged in Python, once.
        reps = con.execute(
            f"SELECT r.sig, r.nkeys, json_type(s.raw, {paths}) FROM (SELECT sig, nkeys, "
            f"arg_min(struct_pack(f := file_id, l := line), line) AS at FROM _k_{kind} GROUP BY sig, nkeys) r "
            "JOIN _stage s ON s.file_id = r.at.f AND s.line = r.at.l"
        ).fetchall()
        good = [
            (sig, nkeys, kind in ("run_start", "run_stop") or nkeys > sum(t is not None for t in types))
            for sig, nkeys, types in reps
            if signature_ok(kind, types)
        ]
        if not good:
            return
        con.register(
            "_good",
            pa.table(
                {
                    "sig": pa.array([g[0] for g in good], pa.uint64()),
                    "nkeys": pa.array([g[1] for g in good], pa.int64()),
                    "keep": pa.array([g[2] for g in good], pa.bool_()),
                }
            ),
        )
        try:
            # Events whose typed row holds everything keep no payload; the others keep the whole line.
            con.execute(
                f"INSERT INTO _acc SELECT k.file_id, k.line, k.j.run_id, k.j.rank, k.j.seq, k.j.time, '{kind}', NULL "
                f"FROM _k_{kind} k JOIN _good g USING (sig, nkeys) WHERE NOT g.keep AND {predicate}"
            )
            if any(g[2] for g in good):
                con.execute(
                    f"INSERT INTO _acc SELECT k.file_id, k.line, k.j.run_id, k.j.rank, k.j.seq, k.j.time, '{kind}', "
                    f"s.raw FROM _k_{kind} k JOIN _good g USING (sig, nkeys) JOIN _stage s USING (file_id, line) "
                    f"WHERE g.keep AND {predicate}"
                )
        finally:
            con.unregister("_good")

    def land(self, file_id: int) -> Landed:
        """Insert the new events of one file (call inside that file's transaction).

        Events already in the store (same run, rank, seq), or repeated within the file, count
        as duplicates and are not inserted again.
        """
        con, out = self.con, Landed()
        run_ids = [
            r[0]
            for r in con.execute("SELECT DISTINCT run_id FROM _acc WHERE file_id = ?", [file_id]).fetchall()
        ]
        if not run_ids:
            return out
        if self._may_repeat(file_id, run_ids):
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _new AS SELECT a.* FROM _acc a "
                f"WHERE a.file_id = ? AND NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id IN {_sql_list(run_ids)} "
                "AND e.run_id = a.run_id AND e.rank = a.rank AND e.seq = a.seq) "
                "QUALIFY row_number() OVER (PARTITION BY a.run_id, a.rank, a.seq ORDER BY a.line) = 1",
                [file_id],
            )
        else:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _new AS SELECT * FROM _acc WHERE file_id = ?", [file_id]
            )
        row = con.execute(
            "SELECT (SELECT count(*) FROM _acc WHERE file_id = ?), (SELECT count(*) FROM _new)", [file_id]
        ).fetchall()[0]
        accepted, new = int(row[0]), int(row[1])
        out.events, out.duplicates = new, accepted - new
        if new:
            con.execute(
                "INSERT INTO events SELECT run_id, rank, seq, time, kind, file_id, line, payload FROM _new"
            )
            con.execute(
                "INSERT INTO markers SELECT run_id, rank, seq, time, kind, file_id, payload FROM _new "
                "WHERE kind IN ('run_start', 'run_stop')"
            )
            con.execute(
                "INSERT INTO run_ranks SELECT run_id, rank, count(*), min(seq), max(seq), min(time), max(time), "
                "any_value(file_id) FROM _new GROUP BY run_id, rank "
                "ON CONFLICT (run_id, rank) DO UPDATE SET events = run_ranks.events + excluded.events, "
                "first_seq = least(run_ranks.first_seq, excluded.first_seq), "
                "last_seq = greatest(run_ranks.last_seq, excluded.last_seq), "
                "first_time = least(run_ranks.first_time, excluded.first_time), "
                "last_time = greatest(run_ranks.last_time, excluded.last_time)"
            )
            for kind in self.kinds:
                table = TYPED_TABLES.get(kind)
                if table is None:
                    continue
                names = [f.name for f in ev.KIND_FIELDS[kind]]
                cols = ", ".join(f'"{n}"' for n in names)
                vals = ", ".join(f'k.j."{n}"' for n in names)
                con.execute(
                    f"INSERT INTO {table} (run_id, rank, seq, time, {cols}) "
                    f"SELECT k.j.run_id, k.j.rank, k.j.seq, k.j.time, {vals} FROM _k_{kind} k "
                    "SEMI JOIN _new n USING (file_id, line) WHERE k.file_id = ?",
                    [file_id],
                )
            out.run_ids = {r[0] for r in con.execute("SELECT DISTINCT run_id FROM _new").fetchall()}
        con.execute("DROP TABLE _new")
        return out

    def _may_repeat(self, file_id: int, run_ids: list[str]) -> bool:
        """Whether the file's events could already be in the store, or repeat within the file.

        Usually not: a new file, or a grown one whose new seqs all lie past what the store
        holds for each (run, rank). Only then is the (costlier) anti-join needed.
        """
        mine = self.con.execute(
            "SELECT run_id, rank, min(seq), max(seq), count(*) = count(DISTINCT seq) FROM _acc WHERE file_id = ? "
            "GROUP BY run_id, rank",
            [file_id],
        ).fetchall()
        if not all(r[4] for r in mine):
            return True
        stored = {
            (r[0], r[1]): (r[2], r[3])
            for r in self.con.execute(
                f"SELECT run_id, rank, first_seq, last_seq FROM run_ranks WHERE run_id IN {_sql_list(run_ids)}"
            ).fetchall()
        }
        for run_id, rank, lo, hi, _ in mine:
            have = stored.get((run_id, rank))
            if have is not None and lo <= have[1] and hi >= have[0]:
                return True
        return False

    def close(self) -> None:
        for kind in ev.KINDS:
            self.con.execute(f"DROP TABLE IF EXISTS _k_{kind}")
        self.con.execute("DROP TABLE IF EXISTS _acc")

"""Landing event lines in the store: validation and inserts in DuckDB, with the contract module as judge.

The fast path runs in SQL, vectorised over a batch of files. While the previous batch lands, the reader's
connection gives every line its *shape* (:func:`shaped`: its top-level keys and their JSON types, hashed);
each distinct (kind, shape) is judged once, in Python, against the contract's field table, and the lines of
good shapes are parsed once more, into their kind's typed row. Enum, bound and finiteness checks are SQL
predicates generated from the same tables. Lines the fast path rejects go to :func:`events.parse_line`, whose
message becomes the quarantine reason, so the reasons come from one place.

Nothing here builds an Arrow array from Python objects: ``pa.array`` checks its input against pandas, and the
first check imports pandas (a fifth of a second of an ingest) whenever it is installed.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from honestscale import events as ev
from honestscale.store import sql_string

TYPED_TABLES = {"step": "steps", "epoch": "epochs", "eval": "evals", "system": "system_samples"}

_DUCK_TYPE = {
    "string": "VARCHAR",
    "integer": "HUGEINT",  # wide enough to see 2^63 .. 2^64 - 1 (a UBIGINT) and refuse it, as the contract does
    "number": "DOUBLE",
    "boolean": "BOOLEAN",
    "object": "JSON",
    "array": "JSON",
}
_JSON_TYPES_OK = {
    "string": {"VARCHAR"},
    "integer": {"BIGINT", "UBIGINT"},  # DuckDB calls every integer >= 0 UBIGINT
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
    conflicts: int = 0  # events whose (run, rank, seq) is stored, or earlier in the batch, with other content
    held: list[Rejected] = field(
        default_factory=list
    )  # for the quarantine: conflicts and what they hold back


def _column(values: np.ndarray[Any, Any], typ: pa.DataType) -> pa.Array:
    """A numpy array as an Arrow column, sharing its memory (``pa.array`` would import pandas to check its input)."""
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])


def lines_batch(file_id: int, first_number: int, lines: pa.Array) -> pa.RecordBatch:
    """Consecutive lines of one file from ``first_number`` (null: not UTF-8, skipped)."""
    n = len(lines)
    return pa.record_batch(
        [
            _column(np.full(n, file_id, np.int32), pa.int32()),
            _column(np.arange(first_number, first_number + n, dtype=np.int64), pa.int64()),
            lines,
            _column(np.arange(n, dtype=np.int64), pa.int64()),
        ],
        names=["file_id", "line", "raw", "pos"],
    )


def numbered_batch(file_id: int, numbered: Iterable[tuple[int, str]], chunk: int = 1 << 16) -> pa.RecordBatch:
    """Lines of one file with their own numbers (events mapped from another tool's log), taken ``chunk`` at a time
    from ``numbered``, so that only one chunk's Python strings live beside the batch."""
    lines: list[pa.Array] = []
    texts: list[pa.Array] = []
    it = iter(numbered)
    while part := list(itertools.islice(it, chunk)):
        lines.append(pa.array([n for n, _ in part], pa.int64()))
        texts.append(pa.array([t for _, t in part], pa.large_string()))
    count = sum(len(a) for a in lines)
    return pa.record_batch(
        [
            pa.repeat(pa.scalar(file_id, pa.int32()), count),
            pa.concat_arrays(lines) if lines else pa.array([], pa.int64()),
            pa.concat_arrays(texts) if texts else pa.array([], pa.large_string()),
            pa.array(range(count), pa.int64()),
        ],
        names=["file_id", "line", "raw", "pos"],
    )


def _low(f: ev.Field) -> int | float:
    """The least value of a numeric field: its minimum, else the least BIGINT or finite DOUBLE."""
    if f.minimum is not None:
        return f.minimum
    return ev.INT_MIN if f.type == "integer" else -sys.float_info.max


def _high(f: ev.Field) -> int | float:
    """The greatest value of a numeric field: its maximum, else the greatest BIGINT or finite DOUBLE. One range
    is also the finiteness check: DuckDB orders NaN above every number, so NaN and both infinities fall outside it."""
    if f.maximum is not None:
        return f.maximum
    return ev.INT_MAX if f.type == "integer" else sys.float_info.max


def _kind_sql(kind: str) -> tuple[str, str]:
    """(json_transform structure, value predicate) for ``kind``."""
    fields = ev.fields_of(kind)
    structure = json.dumps({f.name: _DUCK_TYPE[f.type] for f in fields})
    conds = [f"j.schema BETWEEN 1 AND {ev.SCHEMA_VERSION}"]  # every version up to this one, each as it is
    for f in fields:
        col = f'j."{f.name}"'
        if f.enum is not None and f.name != "kind":
            conds.append(f"({col} IS NULL OR {col} IN ({', '.join(map(sql_string, f.enum))}))")
        if f.type in ("integer", "number"):
            conds.append(f"({col} IS NULL OR {col} BETWEEN {_low(f)!r} AND {_high(f)!r})")
        if f.required_before is not None:  # required in the older versions of the contract
            conds.append(f"({col} IS NOT NULL OR j.schema >= {f.required_before})")
    return sql_string(structure), " AND ".join(conds)


_KIND_SQL = {kind: _kind_sql(kind) for kind in ev.KINDS}


def shape_ok(kind: str, names: list[str], types: list[str]) -> bool | None:
    """Judge a line's shape (its top-level keys and their DuckDB ``json_type``s, in order) against ``kind``.

    None when the shape does not fit (a field missing, null where required, of the wrong type, or
    written twice: DuckDB reads the first, Python the last, so the contract refuses it); else whether
    the line must keep its whole text (a field the typed row does not hold, or a marker event).
    """
    fields = ev.fields_of(kind)
    if len(set(names)) != len(names):
        return None
    by_name = dict(zip(names, types, strict=True))
    for f in fields:
        t = by_name.get(f.name)
        if t is None or t == "NULL":
            if f.required:
                return None
        elif t not in _JSON_TYPES_OK[f.type]:
            return None
    known = {f.name for f in fields}
    return kind in ("run_start", "run_stop") or any(n not in known for n in names)


_SHAPE_SQL = (
    "SELECT file_id, pos, TRY(raw ->> '$.kind') AS kind, hash(raw) AS digest, "
    "CASE WHEN kind IS NOT NULL THEN hash(json_keys(raw), json_type(raw, '$.*')) END AS shape FROM _in"
)


def shaped(con: duckdb.DuckDBPyConnection, batches: list[pa.RecordBatch]) -> pa.Table | None:
    """The batch's lines with their kind, digest and shape (see :meth:`Stage.validate`), computed on ``con``.

    The computed columns are put beside the lines (no copy of the text) when DuckDB returns them in the lines'
    order, as it does with insertion order preserved; else the text comes back with them.
    """
    if not batches:
        return None
    lines = pa.Table.from_batches(batches)
    con.execute("SET SESSION preserve_insertion_order = true")
    con.register("_in", lines)
    try:
        got = con.sql(_SHAPE_SQL).to_arrow_table()
        if got["file_id"].equals(lines["file_id"]) and got["pos"].equals(lines["pos"]):
            for name in ("kind", "digest", "shape"):
                lines = lines.append_column(name, got[name])
            return lines
        return con.sql(
            _SHAPE_SQL.replace("SELECT file_id, pos,", "SELECT file_id, pos, line, raw,")
        ).to_arrow_table()
    finally:
        con.unregister("_in")


class Stage:
    """Validated lines of a batch of files, held in temp tables until the batch lands.

    :meth:`validate` checks every line of the batch (as :func:`shaped` left it) in a few vectorised
    queries (over all files at once, so DuckDB uses every core); :meth:`land` then inserts the new
    events of the whole batch, set-based, inside the batch's transaction. Temp tables are
    private to the connection and never reach the store file.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.kinds: list[str] = []
        self.registered = False

    def validate(self, batches: pa.Table | None) -> dict[int, list[Rejected]]:
        """Check every line; return the rejected ones per file, with the contract's reason."""
        con = self.con
        # files with nothing to read (a new empty file, one grown by blank lines): nothing to check
        if batches is None:
            self._accepted()
            return {}
        # a view dropped inside a transaction that was then rolled back (a shared store's commit conflict) is back
        con.execute("DROP VIEW IF EXISTS temp.main._stage")
        con.register("_stage", batches)
        self.registered = True
        # One representative line per distinct (kind, shape), judged in Python against the kind's field table.
        reps = con.execute(
            "SELECT r.kind, r.shape, json_keys(s.raw), json_type(s.raw, '$.*') FROM (SELECT kind, shape, "
            "arg_min(struct_pack(f := file_id, p := pos), pos) AS at FROM _stage WHERE kind IN ("
            + ", ".join(map(sql_string, ev.KINDS))
            + ") GROUP BY kind, shape) r JOIN _stage s ON s.file_id = r.at.f AND s.pos = r.at.p"
        ).fetchall()
        good = [
            (kind, shape, keep)
            for kind, shape, names, types in reps
            if (keep := shape_ok(kind, names, types)) is not None
        ]
        self.kinds = [k for k in ev.KINDS if any(g[0] == k for g in good)]
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _good AS SELECT unnest(?::VARCHAR[]) AS kind, unnest(?::UBIGINT[]) AS shape, "
            "unnest(?::BOOLEAN[]) AS keep",
            [[g[0] for g in good], [g[1] for g in good], [g[2] for g in good]],
        )
        for kind in self.kinds:
            self._validate_kind(kind)
        self._drop_too_deep(
            [(kind, shape) for kind, shape, _, types in reps if {"OBJECT", "ARRAY"} & set(types)]
        )
        self._accepted()
        rejected: dict[int, list[Rejected]] = {}
        lines, valid = con.execute(
            "SELECT (SELECT count(*) FROM _stage WHERE strlen(raw) > 0), (SELECT count(*) FROM _acc)"
        ).fetchall()[0]
        if lines == valid:
            return rejected
        for file_id, line, raw in con.execute(
            "SELECT file_id, line, raw FROM _stage ANTI JOIN _acc USING (file_id, pos) WHERE strlen(raw) > 0 "
            "ORDER BY file_id, pos"
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
        return rejected

    def _drop_too_deep(self, nested: list[tuple[str, int]]) -> None:
        """Lines nested deeper than the contract allows (``ev.MAX_DEPTH``) leave the typed rows, to be quarantined with
        its reason: DuckDB reads them, Python's json cannot read them back. Only lines of a shape with an object or an
        array among its values, and with more openers than the limit (counted in SQL), are read in Python."""
        if not nested or not self.kinds:
            return
        deep = [
            (file_id, pos)
            for file_id, pos, raw in self.con.execute(
                "SELECT s.file_id, s.pos, s.raw FROM _stage s JOIN (SELECT unnest(?::VARCHAR[]) AS kind, "
                "unnest(?::UBIGINT[]) AS shape) n USING (kind, shape) "
                "WHERE strlen(s.raw) - strlen(replace(replace(s.raw, '[', ''), '{', '')) > ?",
                [[k for k, _ in nested], [sh for _, sh in nested], ev.MAX_DEPTH],
            ).fetchall()
            if ev.nesting(raw) > ev.MAX_DEPTH
        ]
        if not deep:
            return
        for kind in self.kinds:
            self.con.execute(
                f"DELETE FROM _ok_{kind} AS o USING (SELECT unnest(?::INTEGER[]) AS f, unnest(?::BIGINT[]) AS p) d "
                "WHERE o.file_id = d.f AND o.pos = d.p",
                [[f for f, _ in deep], [p for _, p in deep]],
            )

    def _validate_kind(self, kind: str) -> None:
        """Fill ``_ok_<kind>`` with the typed rows of the valid events of ``kind`` (with the whole line where the
        typed row does not hold everything: a field it lacks, or a marker event)."""
        con = self.con
        structure, predicate = _KIND_SQL[kind]
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _ok_{kind} AS SELECT s.file_id, s.pos, s.line, "
            f"json_transform(s.raw, {structure}) AS j, CASE WHEN g.keep THEN s.raw::JSON END AS payload, s.digest "
            f"FROM _stage s JOIN _good g USING (kind, shape) WHERE s.kind = '{kind}'"
        )
        # the values' own bounds (enums, minima, finite numbers), as a second statement: in the first, the
        # transform would be inlined into each term of the predicate and run once per term
        con.execute(f"DELETE FROM _ok_{kind} WHERE ({predicate}) IS NOT TRUE")

    def _accepted(self) -> None:
        """``_acc``: every valid event's envelope (its keys, time, kind, kept line and digest), a view over the
        kinds' typed rows: read a few times as the batch lands, never copied."""
        parts = [
            f"SELECT file_id, pos, line, j.run_id AS run_id, j.rank::INTEGER AS rank, j.seq::BIGINT AS seq, "
            f"j.time AS time, '{kind}' AS kind, payload, digest FROM _ok_{kind}"
            for kind in self.kinds
        ]
        empty = (
            "SELECT NULL::INTEGER AS file_id, NULL::BIGINT AS pos, NULL::BIGINT AS line, NULL::VARCHAR AS run_id, "
            "NULL::INTEGER AS rank, NULL::BIGINT AS seq, NULL::DOUBLE AS time, NULL::VARCHAR AS kind, "
            "NULL::JSON AS payload, NULL::UBIGINT AS digest WHERE false"
        )
        self.con.execute("CREATE OR REPLACE TEMP VIEW _acc AS " + (" UNION ALL ".join(parts) or empty))

    def land(self, recheck: Callable[[list[tuple[Any, ...]]], bool]) -> dict[int, Landed]:
        """Insert the batch's new events (inside the batch's transaction); return what landed per file.

        An event whose (run, rank, seq) is already stored, or earlier in the batch, is a *duplicate*
        when its line has the same bytes (not inserted again) and a *conflict* when it differs: nothing
        stored is replaced, and every event of that run in the conflicting file is held back for the
        quarantine, with the other file named (a run is never a mix of two files' claims). A conflict
        within one file (a seq written twice) holds back only the later line. ``recheck`` gets the
        (file, run, rank, min seq, max seq, count, distinct seqs) of the batch and says whether they
        could repeat; only then are the (costlier) comparisons run.
        """
        con = self.con
        ranges = self._ranges()
        if not ranges:
            return {}
        out: dict[int, Landed] = {}
        for file_id, run_id, _rank, _lo, _hi, count, _distinct in ranges:
            landed = out.setdefault(int(file_id), Landed())
            landed.duplicates += int(count)  # corrected below by what landed and what was held back
            landed.run_ids.add(str(run_id))
        source = "_acc"
        if recheck(ranges):
            self._sort_out_repeats(out)  # reads the raw lines of the held-back events from _stage
            source = "_new"
        self._unregister()  # the batch's text is not needed past this point
        self._insert(source)
        for file_id, new in con.execute(
            f"SELECT file_id, count(*) FROM {source} GROUP BY file_id"
        ).fetchall():
            out[int(file_id)].events = int(new)
        for landed in out.values():
            landed.duplicates -= landed.events + len(landed.held)
        if source == "_new":
            con.execute("DROP TABLE _new; DROP TABLE _clash")
        return out

    def _ranges(self) -> list[tuple[Any, ...]]:
        """(file, run, rank, min seq, max seq, count, distinct seqs) of the batch's events.

        Where every seq of a (file, run, rank) is its line's position plus one constant (a writer numbering its
        events as it writes them, the usual file), its seqs are as distinct as the positions: the distinct seqs are
        counted (a hash of every seq, a tenth of a batch's landing) only where that does not hold.
        """
        con = self.con
        ranges = con.execute(
            "SELECT file_id, run_id, rank, min(seq), max(seq), count(*), min(seq - pos) = max(seq - pos) FROM _acc "
            "GROUP BY file_id, run_id, rank"
        ).fetchall()
        if all(aligned for *_, aligned in ranges):
            return [(*r[:6], r[5]) for r in ranges]
        return con.execute(
            "SELECT file_id, run_id, rank, min(seq), max(seq), count(*), count(DISTINCT seq) FROM _acc "
            "GROUP BY file_id, run_id, rank"
        ).fetchall()

    def _sort_out_repeats(self, out: dict[int, Landed]) -> None:
        """Tell duplicates from conflicts; leave the events to insert in ``_new`` and the held-back ones in ``out``."""
        con = self.con
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _clash AS "
            "WITH stored AS (SELECT e.* FROM events e SEMI JOIN _touched t USING (run_id)), "
            "ordered AS (SELECT a.*, row_number() OVER w AS nth, first_value(a.file_id) OVER w AS f0, "
            "first_value(a.line) OVER w AS l0, first_value(a.digest) OVER w AS d0 FROM _acc a "
            "WINDOW w AS (PARTITION BY a.run_id, a.rank, a.seq ORDER BY a.file_id, a.pos)) "
            "SELECT a.file_id, a.pos, a.line, a.run_id, a.rank, a.seq, e.file_id AS other_file, e.line AS other_line, "
            # events stored before digests existed are compared on time and kind
            "coalesce(e.digest = a.digest, e.time = a.time AND e.kind = a.kind) AS same "
            "FROM _acc a JOIN stored e USING (run_id, rank, seq) "
            "UNION ALL SELECT file_id, pos, line, run_id, rank, seq, f0, l0, digest = d0 FROM ordered WHERE nth > 1"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _held AS SELECT file_id, run_id, "
            "arg_min(struct_pack(line := line, rank := rank, seq := seq, other := other_file, "
            "other_line := other_line), pos) AS first FROM _clash WHERE NOT same AND other_file <> file_id "
            "GROUP BY file_id, run_id"
        )
        rows = con.execute(
            "WITH held AS ("
            "  SELECT a.file_id, a.pos, a.line, a.run_id, a.rank, a.seq, h.first, c.other_file, c.other_line, "
            "  coalesce(NOT c.same, false) AS conflict, false AS self FROM _acc a JOIN _held h USING (file_id, run_id) "
            "  LEFT JOIN (SELECT * FROM _clash QUALIFY row_number() OVER (PARTITION BY file_id, pos "
            "  ORDER BY same) = 1) c USING (file_id, pos) "
            "  UNION ALL SELECT c.file_id, c.pos, c.line, c.run_id, c.rank, c.seq, NULL, c.other_file, c.other_line, "
            "  true, true FROM _clash c ANTI JOIN _held h USING (file_id, run_id) "
            "  WHERE NOT c.same AND c.other_file = c.file_id"
            ") SELECT h.file_id, h.line, s.raw, h.run_id, h.rank, h.seq, h.conflict, h.self, f.path, h.other_line, "
            "h.first.line, h.first.rank, h.first.seq, ff.path, h.first.other_line "
            "FROM held h JOIN _stage s USING (file_id, pos) "
            "LEFT JOIN ingested_files f ON f.file_id = h.other_file "
            "LEFT JOIN ingested_files ff ON ff.file_id = h.first.other "
            "ORDER BY h.file_id, h.pos"
        ).fetchall()
        for file_id, line, raw, run_id, rank, seq, conflict, self_, other, other_line, *first in rows:
            landed = out[int(file_id)]
            if self_:
                reason = (
                    f"conflict within this file: run {run_id} rank {rank} seq {seq} repeats line {other_line} "
                    "with different content; the first one landed. Fix the writer: every event of a rank needs "
                    "its own seq"
                )
            elif conflict:
                reason = (
                    f"conflict: run {run_id} rank {rank} seq {seq} is already stored from {other} line "
                    f"{other_line} with different content; nothing stored was replaced and no event of run "
                    f"{run_id} from this file landed. If they are different runs, give this one its own run_id "
                    "and ingest it again; if they are the same run, keep one copy"
                )
            else:
                f_line, f_rank, f_seq, f_other, f_other_line = first
                reason = (
                    f"held back: this file's run {run_id} conflicts with the stored run (line {f_line}: rank "
                    f"{f_rank} seq {f_seq} differs from {f_other} line {f_other_line}); no event of run "
                    f"{run_id} from this file landed"
                )
            landed.held.append(Rejected(int(line), str(raw), reason))
            landed.conflicts += bool(conflict)
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _new AS SELECT a.* FROM _acc a "
            "ANTI JOIN _clash c USING (file_id, pos) ANTI JOIN _held h USING (file_id, run_id)"
        )
        con.execute("DROP TABLE _held")

    def _insert(self, source: str) -> None:
        con = self.con
        con.execute(
            "INSERT INTO nonstep_events (run_id, rank, seq, time, kind, file_id, line, payload, digest) "
            f"SELECT run_id, rank, seq, time, kind, file_id, line, payload, digest FROM {source} WHERE kind <> 'step'"
        )  # a step's only row is in steps, with its file, line, payload and digest
        con.execute(
            f"INSERT INTO markers SELECT run_id, rank, seq, time, kind, file_id, payload FROM {source} "
            "WHERE kind IN ('run_start', 'run_stop')"
        )
        con.execute(  # MERGE, not ON CONFLICT: a DuckLake store has no keys
            "MERGE INTO run_ranks USING (SELECT run_id, rank, count(*) AS events, min(seq) AS first_seq, "
            "max(seq) AS last_seq, min(time) AS first_time, max(time) AS last_time, any_value(file_id) AS file_id "
            f"FROM {source} GROUP BY run_id, rank) s ON run_ranks.run_id = s.run_id AND run_ranks.rank = s.rank "
            "WHEN MATCHED THEN UPDATE SET events = run_ranks.events + s.events, "
            "first_seq = least(run_ranks.first_seq, s.first_seq), last_seq = greatest(run_ranks.last_seq, s.last_seq), "
            "first_time = least(run_ranks.first_time, s.first_time), last_time = greatest(run_ranks.last_time, s.last_time) "
            "WHEN NOT MATCHED THEN INSERT VALUES (s.run_id, s.rank, s.events, s.first_seq, s.last_seq, s.first_time, "
            "s.last_time, s.file_id)"
        )
        for kind in self.kinds:
            table = TYPED_TABLES.get(kind)
            if table is None:
                continue
            names = [f.name for f in ev.KIND_FIELDS[kind]]
            cols = ", ".join(f'"{n}"' for n in names)
            vals = ", ".join(f'k.j."{n}"' for n in names)
            if kind == "step":
                cols += ", file_id, line, payload, digest"
                vals += ", k.file_id, k.line, k.payload, k.digest"
            only_new = " SEMI JOIN _new n USING (file_id, pos)" if source == "_new" else ""
            con.execute(
                f"INSERT INTO {table} (run_id, rank, seq, time, {cols}) "
                f"SELECT k.j.run_id, k.j.rank, k.j.seq, k.j.time, {vals} FROM _ok_{kind} k{only_new}"
            )

    def _unregister(self) -> None:
        if self.registered:
            self.con.unregister("_stage")
            self.registered = False

    def close(self) -> None:
        self._unregister()
        self.con.execute("DROP VIEW IF EXISTS _acc")
        for kind in ev.KINDS:
            self.con.execute(f"DROP TABLE IF EXISTS _ok_{kind}")
        self.con.execute(
            "DROP TABLE IF EXISTS _good; DROP TABLE IF EXISTS _new; "
            "DROP TABLE IF EXISTS _clash; DROP TABLE IF EXISTS _held"
        )

"""Typed read queries over the store, each returning a polars DataFrame.

The only way ``lint``, ``report`` and the CLI read the store: the SQL lives here, next to
the schema it depends on.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import duckdb
import polars as pl

from honestscale.store._database import NoSuchCampaign, StoreError


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] = ()) -> pl.DataFrame:
    rel = con.sql(sql, params=list(params) or None)
    assert rel is not None
    frame: pl.DataFrame = rel.pl()
    return frame


RUN_LIST_COLUMNS = (
    "run_id",
    "source",
    "campaign",
    "name",
    "system",
    "framework",
    "framework_version",
    "purpose",
    "launcher",
    "slurm_job_id",
    "world_size",
    "n_nodes",
    "n_accelerators",
    "accelerator",
    "global_batch_size",
    "local_batch_size",
    "parallel",
    "status",
    "reason",
    "started_at",
    "stopped_at",
    "time_to_train_s",
    "paused_s",  # a resumed training's seconds between launches, which time_to_train_s leaves out
    "energy_to_train_j",
    "final_split",
    "final_metric",
    "final_value",
    "final_quality",
    "source_file",
    # MLPerf: the review's scaling.json factor of the run's submission (its official score is the olympic mean of
    # the submission's times to train times this); null for other runs and submissions without one
    "TRY_CAST(attrs ->> '$.mlperf.scaling_factor' AS DOUBLE) AS mlperf_scaling_factor",
)


def runs(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """One row per run, ordered by campaign, system, accelerators and start time."""
    where = "WHERE campaign = ?" if campaign else ""
    params = [campaign] if campaign else []
    return _frame(
        con,
        f"SELECT {', '.join(RUN_LIST_COLUMNS)}, superseded FROM (SELECT r.*, s.reason AS superseded FROM runs r "
        f"LEFT JOIN superseded_runs s USING (run_id)) {where} "
        "ORDER BY campaign NULLS LAST, system NULLS LAST, n_accelerators NULLS LAST, world_size, started_at, run_id",
        params,
    )


def resolve_run_id(con: duckdb.DuckDBPyConnection, ref: str) -> str:
    """The run id that ``ref`` names exactly, or the only one that contains it."""
    exact = con.execute("SELECT run_id FROM runs WHERE run_id = ?", [ref]).fetchall()
    if exact:
        return str(exact[0][0])
    matches = [
        str(r[0])
        for r in con.execute(
            "SELECT run_id FROM runs WHERE contains(run_id, ?) ORDER BY run_id",
            [ref],
        ).fetchall()
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StoreError(f"no run {ref!r} in the store", "list the runs with `honestscale runs`")
    shown = ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else "")
    raise StoreError(f"{ref!r} names {len(matches)} runs: {shown}", "give more of the run id")


def run(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """Every column of one run (empty frame if there is none)."""
    return _frame(con, "SELECT * FROM runs WHERE run_id = ?", [run_id])


def evals(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    return _frame(
        con,
        "SELECT rank, time, epoch, split, metric, value, samples FROM evals WHERE run_id = ? "
        "ORDER BY time, rank, seq",
        [run_id],
    )


def step_breakdown(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """Per rank: optimizer steps (warm-up excluded; a step event of a logging interval counts the steps it
    covers), the step events they came in (``intervals``), samples, and total seconds spent in each part of a
    step."""
    return _frame(
        con,
        """
        SELECT rank,
               CAST(sum(coalesce(iterations, 1)) FILTER (WHERE NOT coalesce(warmup, false)) AS BIGINT) AS steps,
               count(*) FILTER (WHERE NOT coalesce(warmup, false)) AS intervals,
               CAST(coalesce(sum(coalesce(iterations, 1)) FILTER (WHERE coalesce(warmup, false)), 0) AS BIGINT)
                   AS warmup_steps,
               CAST(sum(samples) FILTER (WHERE NOT coalesce(warmup, false)) AS BIGINT) AS samples,
               sum(t_total) FILTER (WHERE NOT coalesce(warmup, false)) AS t_total,
               sum(t_data) FILTER (WHERE NOT coalesce(warmup, false)) AS t_data,
               sum(t_compute) FILTER (WHERE NOT coalesce(warmup, false)) AS t_compute,
               sum(t_comm) FILTER (WHERE NOT coalesce(warmup, false)) AS t_comm,
               sum(t_optimizer) FILTER (WHERE NOT coalesce(warmup, false)) AS t_optimizer,
               bool_and(coalesce(comm_measured, t_comm IS NOT NULL)) AS comm_measured
        FROM steps WHERE run_id = ? GROUP BY rank ORDER BY rank
        """,
        [run_id],
    )


def step_series(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """The lowest rank's steps in order: seconds each, whether the run marked it warm-up, and whether that is the
    warm-up it starts with (``lead_in``: every step up to it marked); a step marked later is a resumed launch's
    start-up, which no statistic of the steps counts."""
    return _frame(
        con,
        f"SELECT t_total, warmup, iterations, lead_in FROM ({_LEADING_WARMUP} WHERE run_id = ? "
        "AND rank = (SELECT min(rank) FROM steps WHERE run_id = ?)) ORDER BY time, seq",
        [run_id, run_id],
    )


# a rank's steps with whether each is of the warm-up it starts with (every step up to it marked warm-up)
_LEADING_WARMUP = """
    SELECT * REPLACE (coalesce(warmup, false) AS warmup, coalesce(iterations, 1) AS iterations),
           bool_and(coalesce(warmup, false)) OVER (PARTITION BY run_id, rank ORDER BY time, seq
                                                   ROWS UNBOUNDED PRECEDING) AS lead_in
    FROM steps"""


def profile_steps(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """The profiled steps of the run's profiler traces (evidence beside its step events), by rank and step."""
    return _frame(
        con,
        "SELECT p.rank, p.step, p.device, p.backend, p.t_step, p.t_busy, p.t_idle, p.t_comm, p.t_comm_exposed, "
        "p.comm_by_kind, f.path FROM profile_steps p JOIN ingested_files f USING (file_id) WHERE p.run_id = ? "
        "ORDER BY p.rank, p.step",
        [run_id],
    )


def profiles(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every profiler trace in the store, one row a file: the run it belongs to (NULL: linked to no run), its rank,
    world size, backend and device, how many steps it profiled, their summed time and the device's busy and idle
    time, the collectives' time and their exposed part, summed over those steps."""
    return _frame(
        con,
        "SELECT f.path, p.run_id, p.rank, p.world_size, p.backend, p.device, count(*) AS steps, "
        "sum(p.t_step) AS t_steps, sum(p.t_busy) AS t_busy, sum(p.t_idle) AS t_idle, sum(p.t_comm) AS t_comm, "
        "sum(p.t_comm_exposed) AS t_comm_exposed FROM profile_steps p JOIN ingested_files f USING (file_id) "
        "GROUP BY f.path, p.run_id, p.rank, p.world_size, p.backend, p.device ORDER BY p.run_id NULLS FIRST, f.path",
    )


def event_counts(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """Per rank: events by kind, and seq gaps (events lost or not yet ingested)."""
    return _frame(
        con,
        """
        SELECT rank, count(*) AS events, min(seq) AS first_seq, max(seq) AS last_seq,
               max(seq) - min(seq) + 1 - count(*) AS missing,
               count(*) FILTER (WHERE kind = 'step') AS steps,
               count(*) FILTER (WHERE kind = 'eval') AS evals,
               count(*) FILTER (WHERE kind = 'system') AS system
        FROM events WHERE run_id = ? GROUP BY rank ORDER BY rank
        """,
        [run_id],
    )


def quarantine(con: duckdb.DuckDBPyConnection, path: str | None = None) -> pl.DataFrame:
    where = "WHERE path = ?" if path else ""
    return _frame(
        con,
        f"SELECT path AS file, line, reason, raw, raw_length, is_tail FROM quarantine {where} ORDER BY path, line",
        [path] if path else [],
    )


def tuning_trials(con: duckdb.DuckDBPyConnection, campaign: str, study: str) -> pl.DataFrame:
    """Trials of a tuning study with their mean final validation accuracy, best first."""
    return _frame(
        con,
        """
        WITH last_val AS (
            SELECT run_id, arg_max(value, time) AS val FROM evals WHERE split = 'validation' GROUP BY run_id
        )
        SELECT r.tuning_trial AS trial, count(*) AS runs, avg(v.val) AS validation_accuracy,
               count(*) FILTER (WHERE r.status = 'success') AS succeeded
        FROM runs r LEFT JOIN last_val v USING (run_id)
        WHERE r.campaign = ? AND r.purpose = 'tuning' AND r.tuning_study = ?
        GROUP BY r.tuning_trial ORDER BY validation_accuracy DESC NULLS LAST, trial
        """,
        [campaign, study],
    )


def _step_parts(where: str) -> str:
    """CTEs per_rank and per_run: warm-up excluded, throughput over the slowest rank, fraction of each part,
    whether communication was measured, and the rank imbalance."""
    return f"""
        replicas AS (SELECT run_id, coalesce(replica_ranks, 1) AS replica_ranks FROM runs),
        per_rank AS (
            SELECT run_id, rank, sum(samples) AS samples, sum(tokens) AS tokens, sum(t_total) AS t_total,
                   sum(t_data) AS t_data,
                   sum(t_compute) AS t_compute, sum(t_comm) AS t_comm, sum(t_optimizer) AS t_optimizer,
                   bool_or(coalesce(comm_measured, false)) AS comm_measured
            FROM steps WHERE NOT coalesce(warmup, false) AND {where} GROUP BY run_id, rank
        ),
        per_run AS (
            -- a replica's samples are counted by each of its tensor/pipeline/context-parallel ranks: once here
            SELECT run_id, sum(samples) / nullif(max(t_total), 0) / any_value(k.replica_ranks) AS samples_per_s,
                   sum(tokens) / nullif(max(t_total), 0) / any_value(k.replica_ranks) AS tokens_per_s,
                   sum(t_data) / nullif(sum(t_total), 0) AS data, sum(t_compute) / nullif(sum(t_total), 0) AS compute,
                   sum(t_comm) / nullif(sum(t_total), 0) AS comm, sum(t_optimizer) / nullif(sum(t_total), 0) AS optimizer,
                   bool_or(comm_measured) AS comm_measured,
                   -- the slowest rank's step time over the fastest's (load imbalance, stragglers)
                   CASE WHEN count(*) > 1 THEN max(t_total) / nullif(min(t_total), 0) END AS imbalance
            FROM per_rank JOIN replicas k USING (run_id) GROUP BY run_id
        )"""


def campaign_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every campaign the store knows: named by a run, or recorded with its spec."""
    rows = con.execute(
        "SELECT campaign FROM runs WHERE campaign IS NOT NULL UNION SELECT name FROM campaigns ORDER BY 1"
    ).fetchall()
    return [str(r[0]) for r in rows]


def check_campaign(con: duckdb.DuckDBPyConnection, campaign: str | None) -> None:
    """Refuse a campaign the store does not hold, naming the ones it does (nearest first)."""
    if campaign is None:
        return
    names = campaign_names(con)
    if campaign in names:
        return
    if not names:
        raise NoSuchCampaign(f"no campaign {campaign!r}: the store holds no campaign",
                         "ingest or run one first (honestscale ingest PATH --campaign NAME, or campaign run SPEC)")  # fmt: skip
    close = difflib.get_close_matches(campaign, names, n=len(names), cutoff=0.0)
    ordered = close + [n for n in names if n not in close]
    shown = ", ".join(ordered[:10]) + (f" (+{len(ordered) - 10} more)" if len(ordered) > 10 else "")
    raise NoSuchCampaign(f"no campaign {campaign!r} in the store", f"campaigns here, nearest first: {shown}")


def run_count(con: duckdb.DuckDBPyConnection) -> int:
    rows = con.execute("SELECT count(*) FROM runs").fetchall()
    return int(rows[0][0]) if rows else 0


# ------------------------------------------------------------------------------------- for the linter
def lint_runs(
    con: duckdb.DuckDBPyConnection, campaign: str | None = None, with_superseded: bool = False
) -> pl.DataFrame:
    """Every column of every run (of one campaign), but runs an edited spec superseded (:func:`superseded`) unless
    ``with_superseded`` (a listing of every run)."""
    where = "WHERE campaign = ?" if campaign else ""
    left = "" if with_superseded else "ANTI JOIN superseded_runs s USING (run_id)"
    return _frame(con, f"SELECT * FROM runs {left} {where} ORDER BY run_id", [campaign] if campaign else [])


def superseded(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> dict[str, str]:
    """Run id -> why: the runs an edited campaign spec superseded (kept, in no statistic)."""
    where = "WHERE campaign = ?" if campaign else ""
    rows = con.execute(
        f"SELECT run_id, reason FROM superseded_runs {where} ORDER BY run_id", [campaign] if campaign else []
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def lint_evals(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Every evaluation, with the samples every rank had trained when it was taken (``samples_trained``: the
    steps up to its time, warm-up included; None for a run without step events)."""
    where = "WHERE run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else ""
    return _frame(
        con,
        f"""
        WITH trained AS (
            SELECT run_id, time,
                   sum(samples) OVER (PARTITION BY run_id ORDER BY time, rank, seq) / coalesce(k.replica_ranks, 1)
                       AS samples_trained
            FROM steps LEFT JOIN (SELECT run_id, replica_ranks FROM runs) k USING (run_id) {where}
        ),
        e AS (SELECT run_id, rank, seq, time, epoch, split, metric, value FROM evals {where})
        SELECT e.run_id, e.rank, e.time, e.epoch, e.split, e.metric, e.value,
               CAST(t.samples_trained AS DOUBLE) AS samples_trained
        FROM e ASOF LEFT JOIN trained t ON e.run_id = t.run_id AND e.time >= t.time
        ORDER BY e.run_id, e.time, e.seq
        """,
        [campaign, campaign] if campaign else [],
    )


def lake_snapshot(con: duckdb.DuckDBPyConnection) -> int:
    """A DuckLake store's latest snapshot id: it changes with every commit."""
    row = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots(current_database())").fetchall()[0]
    return int(row[0]) if row and row[0] is not None else 0


def energy_records(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Energy measured outside the runs' events (CodeCarbon rows, sacct lines), one row per distinct record (the
    same sacct line in two files is one), with the file and line of its first copy."""
    return _frame(
        con,
        """
        SELECT r.format, r.job_id, r.step_id, r.host, r.nodes, r.started_at, r.stopped_at, r.energy_j, r.method,
               r.state, min(f.path || ':' || r.line) AS source
        FROM energy_records r JOIN ingested_files f ON f.file_id = r.file_id
        GROUP BY ALL ORDER BY r.started_at NULLS LAST, r.job_id, r.step_id
        """,
    )


def lint_power(
    con: duckdb.DuckDBPyConnection, campaign: str | None = None, run_id: str | None = None
) -> pl.DataFrame:
    """The accelerators' power and energy-counter samples (NVML), per run, rank and device, in time order (of one
    campaign, or of one run)."""
    where, params = ("AND run_id = ?", [run_id]) if run_id else ("", [])
    if campaign:
        where, params = (
            where + " AND run_id IN (SELECT run_id FROM runs WHERE campaign = ?)",
            [*params, campaign],
        )
    return _frame(
        con,
        f"""
        SELECT run_id, rank, coalesce(device, -1) AS device, time, power_w, energy_j FROM system_samples
        WHERE (power_w IS NOT NULL OR energy_j IS NOT NULL) {where}
        ORDER BY run_id, rank, device, time, seq
        """,
        params,
    )


def rank_step_times(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Per run and rank: the step times after warm-up (``times``, a list), for the test of whether ranks differ."""
    where = "AND run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else ""
    return _frame(
        con,
        f"""
        SELECT run_id, rank, list(t_total ORDER BY epoch, step) AS times FROM steps
        WHERE NOT coalesce(warmup, false) {where} GROUP BY run_id, rank ORDER BY run_id, rank
        """,
        [campaign] if campaign else [],
    )


def lint_step_series(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Per run: its lowest rank's step times in order (the warm-up it starts with included; a step marked warm-up
    later, a resumed launch's start-up, left out), the host's contention during each (its CPU
    pressure plus its steal time, seconds; NULL where neither was measured), how many it marked warm-up, and the most iterations one step event covers (where the
    steady state is found in the data)."""
    where = "WHERE run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else ""
    return _frame(
        con,
        f"""
        WITH low AS (SELECT run_id, min(rank) AS rank FROM steps {where} GROUP BY run_id),
        s AS ({_LEADING_WARMUP})
        SELECT s.run_id, list(s.t_total ORDER BY s.time, s.seq) AS times,
               list(CASE WHEN s.cpu_pressure IS NULL AND s.cpu_steal IS NULL THEN NULL
                         ELSE coalesce(s.cpu_pressure, 0) + coalesce(s.cpu_steal, 0) END ORDER BY s.time, s.seq)
                   AS pressure,
               count(*) FILTER (WHERE s.warmup) AS marked,
               max(s.iterations) AS iterations
        FROM s JOIN low USING (run_id, rank) WHERE s.t_total IS NOT NULL AND (s.lead_in OR NOT s.warmup)
        GROUP BY s.run_id
        """,
        [campaign] if campaign else [],
    )


def lint_steps(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Per run: step counts, warm-up marks, whether steps carry a data part, how slow the first steps are, and
    the distribution of its synchronous steps (warm-up excluded).

    A synchronous step lasts as long as its slowest rank (max of t_total over ranks, per epoch and step) and
    trains the samples of every rank. Outliers are the steps above Tukey's upper fence, Q3 + 1.5 IQR (SC15);
    their excess is the time they took beyond the median step.
    """
    where = "WHERE run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else ""
    return _frame(
        con,
        f"""
        WITH s AS (
            SELECT run_id, rank, step, t_total, t_data, warmup,
                   row_number() OVER (PARTITION BY run_id, rank ORDER BY step) AS n
            FROM steps {where}
        ),
        counts AS (
            SELECT run_id,
                   count(*) AS steps,
                   count(*) FILTER (WHERE warmup) AS warmup_steps,
                   count(*) FILTER (WHERE warmup IS NOT NULL) AS warmup_marked,
                   count(t_data) AS steps_with_data,
                   median(t_total) FILTER (WHERE n > 10) AS median_step_s,
                   max(t_total) FILTER (WHERE n <= 3) AS first_steps_max_s,
                   max(t_total) FILTER (WHERE n <= 3 AND NOT coalesce(warmup, false)) AS first_unmarked_max_s
            FROM s GROUP BY run_id
        ),
        sync AS (
            SELECT run_id, epoch, step, max(t_total) AS t, sum(samples) / any_value(coalesce(k.replica_ranks, 1)) AS samples,
                   sum(tokens) / any_value(coalesce(k.replica_ranks, 1)) AS tokens,
                   bool_or(coalesce(warmup, false)) AS warm
            FROM steps LEFT JOIN (SELECT run_id, replica_ranks FROM runs) k USING (run_id) {where}
            GROUP BY run_id, epoch, step
        ),
        q AS (
            SELECT run_id, count(*) AS sync_steps, median(t) AS sync_median_s,
                   quantile_cont(t, 0.75) + 1.5 * (quantile_cont(t, 0.75) - quantile_cont(t, 0.25)) AS fence_s,
                   median(samples) AS samples_per_step, sum(t) AS step_time_s,
                   CAST(sum(samples) AS DOUBLE) AS samples_timed, CAST(sum(tokens) AS DOUBLE) AS tokens_timed
            FROM sync WHERE NOT warm GROUP BY run_id
        ),
        tails AS (
            SELECT q.run_id, count(*) FILTER (WHERE s.t > q.fence_s) AS outliers,
                   coalesce(sum(s.t - q.sync_median_s) FILTER (WHERE s.t > q.fence_s), 0) AS outlier_excess_s,
                   max(s.t) AS slowest_step_s
            FROM q JOIN sync s ON s.run_id = q.run_id AND NOT s.warm GROUP BY q.run_id
        ),
        trained AS (SELECT run_id, CAST(sum(samples) AS DOUBLE) AS samples_trained FROM sync GROUP BY run_id)
        SELECT c.*, q.sync_steps, q.sync_median_s, q.fence_s, CAST(q.samples_per_step AS DOUBLE) AS samples_per_step,
               q.step_time_s, q.samples_timed, q.tokens_timed, t.outliers, t.outlier_excess_s, t.slowest_step_s, trained.samples_trained
        FROM counts c LEFT JOIN q USING (run_id) LEFT JOIN tails t USING (run_id) LEFT JOIN trained USING (run_id)
        ORDER BY run_id
        """,
        [campaign, campaign] if campaign else [],
    )


def campaign_specs(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return _frame(con, "SELECT name, spec FROM campaigns ORDER BY name")


def run_step_fractions(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Per run (warm-up excluded): samples/s over the slowest rank, and the fraction of step time per part."""
    where = "run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else "true"
    return _frame(
        con,
        f"WITH {_step_parts(where)} SELECT * FROM per_run ORDER BY run_id",
        [campaign] if campaign else [],
    )


# run_start fields every rank of one run must agree on
AGREED_FIELDS = (
    "campaign", "framework", "model", "dataset", "world_size", "nodes", "global_batch_size", "local_batch_size",
    "precision", "parallel", "config_hash",
)  # fmt: skip


def lint_ranks(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Per run: the ranks seen and the ranks with steps (warm-up included); events stamped before the one before them on their rank (by seq: a clock that
    went backwards) and the largest such step back, in the runners' own events (an MLPerf log's offline evaluations
    are placed at their checkpoint's time on purpose); and the run_start fields
    (``AGREED_FIELDS``) on which its ranks disagree, each as a ``{field, vals}`` struct."""
    where = "WHERE run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else ""
    native = "run_id IN (SELECT run_id FROM runs WHERE source = 'native'" + (
        " AND campaign = ?)" if campaign else ")"
    )
    fields = " UNION ALL ".join(
        f"SELECT run_id, '{f}' AS field, list(DISTINCT payload ->> '{f}' ORDER BY payload ->> '{f}') "
        f"FILTER (WHERE (payload ->> '{f}') IS NOT NULL) AS vals FROM markers WHERE kind = 'run_start' {'AND' if where else ''} {where.removeprefix('WHERE ')} GROUP BY run_id"
        for f in AGREED_FIELDS
    )
    params: list[object] = [campaign] if campaign else []
    return _frame(
        con,
        f"""
        WITH seen AS (SELECT run_id, list(rank ORDER BY rank) AS seen FROM run_ranks {where} GROUP BY run_id),
        stepped AS (SELECT run_id, list(DISTINCT rank ORDER BY rank) AS stepped FROM steps {where} GROUP BY run_id),
        back AS (
            SELECT run_id, count(*) AS clock_backwards, max(prev - time) AS clock_backwards_s FROM (
                SELECT run_id, time, lag(time) OVER (PARTITION BY run_id, rank ORDER BY seq) AS prev
                FROM events WHERE {native}
            ) WHERE time < prev GROUP BY run_id
        ),
        f AS ({fields}),
        dis AS (
            SELECT run_id, list(struct_pack(field := field, vals := vals) ORDER BY field) AS disagree
            FROM f WHERE len(vals) > 1 GROUP BY run_id
        )
        SELECT seen.run_id, seen.seen, stepped.stepped, coalesce(back.clock_backwards, 0) AS clock_backwards,
               coalesce(back.clock_backwards_s, 0.0) AS clock_backwards_s,
               dis.disagree
        FROM seen LEFT JOIN stepped USING (run_id) LEFT JOIN back USING (run_id) LEFT JOIN dis USING (run_id)
        ORDER BY seen.run_id
        """,
        params * (3 + len(AGREED_FIELDS)),
    )

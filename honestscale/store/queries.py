"""Typed read queries over the store, each returning a polars DataFrame.

The only way ``lint``, ``report`` and the CLI read the store: the SQL lives here, next to
the schema it depends on.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import polars as pl

from honestscale.store._database import StoreError


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
    "status",
    "reason",
    "started_at",
    "stopped_at",
    "time_to_train_s",
    "final_split",
    "final_metric",
    "final_value",
    "source_file",
)


def runs(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """One row per run, ordered by campaign, system, accelerators and start time."""
    where = "WHERE campaign = ?" if campaign else ""
    params = [campaign] if campaign else []
    return _frame(
        con,
        f"SELECT {', '.join(RUN_LIST_COLUMNS)} FROM runs {where} "
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
    """Per rank: steps (warm-up excluded), samples, and total seconds spent in each part of a step."""
    return _frame(
        con,
        """
        SELECT rank,
               count(*) FILTER (WHERE NOT coalesce(warmup, false)) AS steps,
               count(*) FILTER (WHERE coalesce(warmup, false)) AS warmup_steps,
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
        per_rank AS (
            SELECT run_id, rank, sum(samples) AS samples, sum(t_total) AS t_total, sum(t_data) AS t_data,
                   sum(t_compute) AS t_compute, sum(t_comm) AS t_comm, sum(t_optimizer) AS t_optimizer,
                   bool_or(coalesce(comm_measured, false)) AS comm_measured
            FROM steps WHERE NOT coalesce(warmup, false) AND {where} GROUP BY run_id, rank
        ),
        per_run AS (
            SELECT run_id, sum(samples) / nullif(max(t_total), 0) AS samples_per_s,
                   sum(t_data) / nullif(sum(t_total), 0) AS data, sum(t_compute) / nullif(sum(t_total), 0) AS compute,
                   sum(t_comm) / nullif(sum(t_total), 0) AS comm, sum(t_optimizer) / nullif(sum(t_total), 0) AS optimizer,
                   bool_or(comm_measured) AS comm_measured,
                   -- the slowest rank's step time over the fastest's (load imbalance, stragglers)
                   CASE WHEN count(*) > 1 THEN max(t_total) / nullif(min(t_total), 0) END AS imbalance
            FROM per_rank GROUP BY run_id
        )"""


def scaling_summary(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Final runs grouped by campaign, framework and worker count: medians across repetitions.

    Throughput of a run: samples of all ranks over the slowest rank's step time (warm-up
    excluded). Time to accuracy: from run start to the first validation evaluation at or above
    the run's target (runs stopped on a target accuracy only).
    """
    where = "AND r.campaign = ?" if campaign else ""
    return _frame(
        con,
        f"""
        WITH r AS (SELECT * FROM runs r WHERE coalesce(r.purpose, 'final') = 'final' {where}),
        {_step_parts("run_id IN (SELECT run_id FROM r)")},
        tta AS (
            SELECT r.run_id, min(v.time) - any_value(r.started_at) AS tta_s
            FROM r JOIN evals v USING (run_id)
            WHERE r.stop_criterion = 'target_accuracy' AND v.split = 'validation' AND v.value >= r.stop_value
            GROUP BY r.run_id
        ),
        test AS (SELECT run_id, arg_max(value, time) AS test_acc FROM evals WHERE split = 'test' GROUP BY run_id)
        SELECT r.campaign, r.framework, r.world_size AS workers, count(*) AS runs,
               count(*) FILTER (WHERE r.status = 'success') AS succeeded,
               median(r.time_to_train_s) AS time_to_train_s, median(tta.tta_s) AS time_to_accuracy_s,
               median(p.samples_per_s) AS samples_per_s, median(p.samples_per_s) / r.world_size AS per_worker,
               median(p.data) AS data, median(p.compute) AS compute, median(p.comm) AS comm,
               median(p.optimizer) AS optimizer, median(test.test_acc) AS test_accuracy
        FROM r LEFT JOIN per_run p USING (run_id) LEFT JOIN tta USING (run_id) LEFT JOIN test USING (run_id)
        GROUP BY r.campaign, r.framework, r.world_size
        ORDER BY r.campaign NULLS LAST, r.framework, r.world_size
        """,
        [campaign] if campaign else [],
    )


# ------------------------------------------------------------------------------------- for the linter
def lint_runs(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    """Every column of every run (of one campaign)."""
    where = "WHERE campaign = ?" if campaign else ""
    return _frame(con, f"SELECT * FROM runs {where} ORDER BY run_id", [campaign] if campaign else [])


def lint_evals(con: duckdb.DuckDBPyConnection, campaign: str | None = None) -> pl.DataFrame:
    where = "WHERE run_id IN (SELECT run_id FROM runs WHERE campaign = ?)" if campaign else ""
    return _frame(
        con,
        f"SELECT run_id, rank, time, epoch, split, metric, value FROM evals {where} ORDER BY run_id, time, seq",
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
            SELECT run_id, epoch, step, max(t_total) AS t, sum(samples) AS samples,
                   bool_or(coalesce(warmup, false)) AS warm
            FROM steps {where} GROUP BY run_id, epoch, step
        ),
        q AS (
            SELECT run_id, count(*) AS sync_steps, median(t) AS sync_median_s,
                   quantile_cont(t, 0.75) + 1.5 * (quantile_cont(t, 0.75) - quantile_cont(t, 0.25)) AS fence_s,
                   median(samples) AS samples_per_step, sum(t) AS step_time_s,
                   CAST(sum(samples) AS DOUBLE) AS samples_timed
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
               q.step_time_s, q.samples_timed, t.outliers, t.outlier_excess_s, t.slowest_step_s, trained.samples_trained
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

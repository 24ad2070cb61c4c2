"""The reads behind ``honestscale serve``: a campaign overview in one query, and a run's series along its steps.

Long series are reduced in SQL to at most ``buckets`` points per rank (the mean of each step part per bucket, with
the bucket's slowest step, and whether it holds warm-up steps or stalls), so that a page never carries a million
points and its figure shows every stall.
"""

from __future__ import annotations

import duckdb
import polars as pl

from honestscale.store.queries import _frame

RUNNING_WITHIN_S = 300.0  # an incomplete run with an event this recent is shown as running


def campaign_overview(con: duckdb.DuckDBPyConnection, now: float) -> pl.DataFrame:
    """Per campaign (runs without one under an empty name): runs planned by its spec, landed, succeeded, failed,
    incomplete and running (no run_stop yet, an event in the last ``RUNNING_WITHIN_S``), superseded, the last event
    and a fingerprint that changes whenever anything of the campaign changes."""
    return _frame(
        con,
        """
        WITH last AS (
            SELECT run_id, max(last_time) AS last_time, sum(events) AS events FROM run_ranks GROUP BY run_id
        ),
        r AS (
            SELECT coalesce(r.campaign, '') AS campaign, r.status, l.last_time, l.events,
                   s.run_id IS NOT NULL AS superseded
            FROM runs r LEFT JOIN last l USING (run_id) LEFT JOIN superseded_runs s USING (run_id)
        ),
        landed AS (
            SELECT campaign, count(*) AS landed,
                   count(*) FILTER (WHERE status = 'success') AS succeeded,
                   count(*) FILTER (WHERE status NOT IN ('success', 'incomplete', 'end_unknown')) AS failed,
                   count(*) FILTER (WHERE status = 'incomplete' AND last_time >= ?) AS running,
                   count(*) FILTER (WHERE status = 'incomplete' AND (last_time IS NULL OR last_time < ?)
                                           OR status = 'end_unknown') AS incomplete,
                   count(*) FILTER (WHERE superseded) AS superseded,
                   max(last_time) AS last_event, CAST(coalesce(sum(events), 0) AS BIGINT) AS events
            FROM r GROUP BY campaign
        ),
        planned AS (
            SELECT name AS campaign,
                   json_array_length(spec -> '$.planned_runs') AS planned,
                   md5(coalesce(CAST(spec AS VARCHAR), '')) AS spec_hash
            FROM campaigns
        )
        SELECT campaign, coalesce(planned.planned, 0) AS planned, coalesce(landed, 0) AS landed,
               coalesce(succeeded, 0) AS succeeded, coalesce(failed, 0) AS failed,
               coalesce(running, 0) AS running, coalesce(incomplete, 0) AS incomplete,
               coalesce(superseded, 0) AS superseded, last_event, coalesce(events, 0) AS events,
               coalesce(spec_hash, '') AS spec_hash
        FROM landed FULL OUTER JOIN planned USING (campaign)
        ORDER BY last_event DESC NULLS LAST, campaign
        """,
        [now - RUNNING_WITHIN_S, now - RUNNING_WITHIN_S],
    )


def run_steps(con: duckdb.DuckDBPyConnection, run_id: str, buckets: int = 400) -> pl.DataFrame:
    """Per rank, the step events along the run in at most ``buckets`` buckets: the first event's index, events,
    mean seconds of each part, the slowest event, warm-up events, the most steps one event covers (a logging
    interval's), and stalls (steps above the rank's Tukey fence, Q3 + 1.5 IQR of its
    steps after warm-up, as HS210 counts them)."""
    return _frame(
        con,
        """
        WITH s AS (
            SELECT rank, row_number() OVER (PARTITION BY rank ORDER BY time, seq) - 1 AS n, step, epoch, time,
                   t_total, t_data, t_compute, t_comm, t_optimizer, coalesce(warmup, false) AS warm,
                   coalesce(iterations, 1) AS iterations
            FROM steps WHERE run_id = ?
        ),
        fence AS (
            SELECT rank, quantile_cont(t_total, 0.75) + 1.5 * (quantile_cont(t_total, 0.75)
                   - quantile_cont(t_total, 0.25)) AS fence, median(t_total) AS median_step
            FROM s WHERE NOT warm GROUP BY rank
        ),
        sized AS (SELECT rank, greatest(1, ceil(count(*) / ?)) AS width FROM s GROUP BY rank)
        SELECT s.rank, CAST(floor(s.n / sized.width) AS BIGINT) AS bucket, min(s.n) AS first_step,
               count(*) AS steps, min(s.time) AS time,
               avg(t_total) AS t_total, avg(t_data) AS t_data, avg(t_compute) AS t_compute,
               avg(t_comm) AS t_comm, avg(t_optimizer) AS t_optimizer, max(t_total) AS slowest,
               count(*) FILTER (WHERE warm) AS warmup, max(iterations) AS iterations,
               count(*) FILTER (WHERE NOT warm AND t_total > fence.fence) AS stalls,
               any_value(fence.fence) AS fence, any_value(fence.median_step) AS median_step
        FROM s JOIN sized USING (rank) LEFT JOIN fence USING (rank)
        GROUP BY s.rank, bucket ORDER BY s.rank, bucket
        """,
        [run_id, buckets],
    )


def run_system(con: duckdb.DuckDBPyConnection, run_id: str, buckets: int = 300) -> pl.DataFrame:
    """System samples along the run (means per time bucket, per rank and device): power, utilisation, memory,
    CPU, host load."""
    return _frame(
        con,
        """
        WITH s AS (SELECT * FROM system_samples WHERE run_id = ?),
        span AS (SELECT min(time) AS t0, greatest(max(time) - min(time), 1e-9) AS width FROM s)
        SELECT rank, coalesce(device, -1) AS device,
               CAST(floor((time - t0) / width * ?) AS BIGINT) AS bucket, min(time - t0) AS t,
               avg(power_w) AS power_w, avg(accel_util) AS accel_util, avg(accel_mem_bytes) AS accel_mem_bytes,
               avg(cpu_percent) AS cpu_percent, avg(rss_bytes) AS rss_bytes, avg(host_load) AS host_load
        FROM s, span GROUP BY ALL ORDER BY rank, device, bucket
        """,
        [run_id, buckets],
    )


def run_quarantine(con: duckdb.DuckDBPyConnection, run_id: str, limit: int = 100) -> tuple[int, pl.DataFrame]:
    """Quarantined lines of the files that hold this run's events: how many, and the first ``limit``."""
    files = (
        "SELECT file_id FROM run_ranks WHERE run_id = ? UNION SELECT file_id FROM markers WHERE run_id = ?"
    )
    row = con.execute(
        f"SELECT count(*) FROM quarantine WHERE file_id IN ({files})", [run_id, run_id]
    ).fetchall()
    lines = _frame(
        con,
        f"SELECT path, line, reason, raw, raw_length FROM quarantine WHERE file_id IN ({files}) "
        "ORDER BY path, line LIMIT ?",
        [run_id, run_id, limit],
    )
    return (int(row[0][0]) if row else 0), lines


def run_ranks(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """Per rank: events landed, their seq range, and how many are missing inside it (lost, or not landed yet)."""
    return _frame(
        con,
        "SELECT rank, events, first_seq, last_seq, last_seq - first_seq + 1 - events AS missing, "
        "last_time - first_time AS span_s FROM run_ranks WHERE run_id = ? ORDER BY rank",
        [run_id],
    )


__all__ = ["RUNNING_WITHIN_S", "campaign_overview", "run_quarantine", "run_ranks", "run_steps", "run_system"]

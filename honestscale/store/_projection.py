"""The ``runs`` table: one row per run, derived from its events.

It is a projection, never edited by hand: after every file lands, the rows of the runs that
file touched are recomputed, inside the same transaction, from small tables kept beside the
events (``markers``: run_start/run_stop; ``run_ranks``: per-rank counts), ``evals`` and
``ingested_files``; never by scanning every event, so landing a file costs the same in a
small store as in a large one.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from honestscale.store._sql import sql_in_list

# runs column <- run_start field, with its SQL type. JSON columns keep the JSON value.
_FROM_RUN_START: tuple[tuple[str, str, str], ...] = (
    ("name", "name", "VARCHAR"),
    ("purpose", "purpose", "VARCHAR"),
    ("tuning_study", "tuning_study", "VARCHAR"),
    ("tuning_trial", "tuning_trial", "VARCHAR"),
    ("framework", "framework", "VARCHAR"),
    ("framework_version", "framework_version", "VARCHAR"),
    ("launcher", "launcher", "VARCHAR"),
    ("backend", "backend", "VARCHAR"),
    ("world_size", "world_size", "INTEGER"),
    ("n_nodes", "nodes", "INTEGER"),
    ("accelerators_per_node", "accelerators_per_node", "INTEGER"),
    ("accelerator", "accelerator", "VARCHAR"),
    ("system", "system", "VARCHAR"),
    ("host", "host", "VARCHAR"),
    ("cpu", "cpu", "VARCHAR"),
    ("interconnect", "interconnect", "VARCHAR"),
    ("intra_op_threads", "intra_op_threads", "INTEGER"),
    ("inter_op_threads", "inter_op_threads", "INTEGER"),
    ("cpus_allowed", "cpus_allowed", "INTEGER"),
    ("cpu_affinity", "cpu_affinity", "JSON"),
    ("launch_env", "launch_env", "JSON"),
    ("software", "software", "JSON"),
    ("model", "model", "VARCHAR"),
    ("model_params", "model_params", "BIGINT"),
    ("dataset", "dataset", "VARCHAR"),
    ("train_size", "train_size", "BIGINT"),
    ("validation_size", "validation_size", "BIGINT"),
    ("test_size", "test_size", "BIGINT"),
    ("data_source", "data_source", "VARCHAR"),
    ("data_path", "data_path", "VARCHAR"),
    ("input_shape", "input_shape", "JSON"),
    ("global_batch_size", "global_batch_size", "BIGINT"),
    ("local_batch_size", "local_batch_size", "BIGINT"),
    ("optimizer", "optimizer", "VARCHAR"),
    ("learning_rate", "learning_rate", "DOUBLE"),
    ("lr_schedule", "lr_schedule", "VARCHAR"),
    ("precision", "precision", "VARCHAR"),
    ("grad_compression", "grad_compression", "VARCHAR"),
    ("seed", "seed", "BIGINT"),
    ("stop_criterion", "stop_criterion", "VARCHAR"),
    ("stop_value", "stop_value", "DOUBLE"),
    ("target_metric", "target_metric", "VARCHAR"),
    ("scope", "scope", "VARCHAR"),
    ("scaling", "scaling", "VARCHAR"),
    ("config_hash", "config_hash", "VARCHAR"),
    ("git_commit", "git_commit", "VARCHAR"),
    ("slurm_job_id", "slurm_job_id", "VARCHAR"),
    ("slurm_step_id", "slurm_step_id", "VARCHAR"),
    ("parallel", "parallel", "JSON"),
    ("pipeline_schedule", "pipeline_schedule", "VARCHAR"),
    ("microbatches", "microbatches", "INTEGER"),
    ("sequence_length", "sequence_length", "INTEGER"),
    ("global_batch_tokens", "global_batch_tokens", "BIGINT"),
    ("activation_checkpointing", "activation_checkpointing", "VARCHAR"),
    ("compute_dtype", "compute_dtype", "VARCHAR"),
    ("params_total", "params_total", "BIGINT"),
    ("params_embedding", "params_embedding", "BIGINT"),
    ("params_active", "params_active", "BIGINT"),
)

# the ranks that share one data-parallel replica's samples (tensor x pipeline x context parallel): sums of samples
# and tokens over ranks are divided by it; a degree that is not a positive JSON integer counts as 1, as
# ``Run.degrees`` reads it (the contract's validation leaves the object's members to the reader; HS213 names a
# layout that does not multiply to the world size)
_REPLICA_RANKS = " * ".join(
    f"CASE WHEN json_type(s.p -> 'parallel' -> '{d}') = 'UBIGINT' "
    f"THEN greatest(TRY_CAST(s.p -> 'parallel' ->> '{d}' AS INTEGER), 1) ELSE 1 END"
    for d in ("tp", "pp", "cp")
)


def _field(column: str, field: str, sql_type: str) -> str:
    if sql_type == "JSON":
        return f"s.p -> '{field}' AS {column}"
    return f"TRY_CAST(s.p ->> '{field}' AS {sql_type}) AS {column}"


# Worst status wins when ranks disagree: one failed rank fails the run.
_SEVERITY = (
    "CASE payload ->> 'status' WHEN 'failed' THEN 1 WHEN 'timeout' THEN 2 "
    "WHEN 'cancelled' THEN 3 WHEN 'aborted' THEN 4 ELSE 5 END"
)

_INSERT = f"""
INSERT INTO runs
WITH seen AS (
    SELECT run_id, count(*) AS ranks_seen, arg_min(file_id, rank) AS any_file
    FROM run_ranks WHERE run_id IN __RUN_IDS__ GROUP BY run_id
),
s AS (
    SELECT run_id, arg_min(payload, rank) AS p, min(time) AS started_at, arg_min(file_id, rank) AS file_id
    FROM markers WHERE run_id IN __RUN_IDS__ AND kind = 'run_start' GROUP BY run_id
),
stops AS (
    SELECT run_id,
           max(time) AS stopped_at,
           count(DISTINCT rank) AS ranks_stopped,
           arg_min(payload ->> 'status', {_SEVERITY}) AS status,
           -- among the worst, the earliest: the first rank to fail says why; the others fail because of it
           arg_min(payload ->> 'reason', ({_SEVERITY}) * 1e10 + time) AS reason,
           -- measured outside the runner (MLPerf power logs) and written by one rank: the lowest that has it
           arg_min(TRY_CAST(payload ->> 'energy_j' AS DOUBLE), rank) AS energy_j,
           -- a resumed training's time between its launches: no training (contract 6)
           max(TRY_CAST(payload ->> 'paused_s' AS DOUBLE)) AS paused_s
    FROM markers WHERE run_id IN __RUN_IDS__ AND kind = 'run_stop' GROUP BY run_id
),
fin AS (
    -- the run's target metric on its most held-out split, else another quality metric, else a loss
    -- the quality the run stopped at: evaluations after its run_stop (a trailing MLPerf eval) only without one
    SELECT v.run_id, v.split, v.metric, v.value
    FROM evals v LEFT JOIN s USING (run_id) LEFT JOIN stops USING (run_id) WHERE v.run_id IN __RUN_IDS__
    QUALIFY row_number() OVER (
        PARTITION BY v.run_id
        ORDER BY CASE v.split WHEN 'test' THEN 3 WHEN 'validation' THEN 2 ELSE 1 END DESC,
                 coalesce(v.time <= stops.stopped_at, true) DESC,
                 coalesce(v.metric = (s.p ->> 'target_metric'), false) DESC,
                 (lower(v.metric) LIKE '%loss%' OR lower(v.metric) IN ('perplexity', 'wer')) ASC,
                 v.time DESC, v.rank ASC, v.seq DESC
    ) = 1
),
quality AS (
    -- the last value of every metric on the final split
    SELECT run_id, json_group_object(metric, value) AS final_quality FROM (
        SELECT v.run_id, v.metric, v.value FROM evals v JOIN fin USING (run_id) LEFT JOIN stops USING (run_id)
        WHERE v.split = fin.split
        QUALIFY row_number() OVER (
            PARTITION BY v.run_id, v.metric
            ORDER BY coalesce(v.time <= stops.stopped_at, true) DESC, v.time DESC, v.rank ASC, v.seq DESC
        ) = 1
    ) GROUP BY run_id
)
SELECT
    seen.run_id,
    coalesce(f.format, f0.format) AS source,
    coalesce(s.p ->> 'campaign', f.campaign, f0.campaign) AS campaign,
    {", ".join(_field(*spec) for spec in _FROM_RUN_START)},
    -- accelerators in use: none on a CPU-only run (0 accelerators per node: its workers are processes, counted
    -- by world_size, never as accelerators); nodes x accelerators per node; where those are unknown, one a worker,
    -- unless the log it came from says it cannot tell its accelerator (imported.unknown: a CPU run logged to a
    -- tracker is not "2 x unknown model")
    CASE WHEN TRY_CAST(s.p ->> 'accelerators_per_node' AS BIGINT) = 0 THEN 0
         WHEN list_contains(coalesce(json_extract_string(s.p, '$.imported.unknown[*]'), []::VARCHAR[]), 'accelerator')
              AND (s.p ->> 'nodes') IS NULL THEN NULL ELSE coalesce(
        -- TRY: a product past the INTEGER column (absurd, but valid per field) is unknown, not a failed ingest
        nullif(TRY_CAST(TRY(TRY_CAST(s.p ->> 'nodes' AS BIGINT) * TRY_CAST(s.p ->> 'accelerators_per_node' AS BIGINT))
                        AS INTEGER), 0),
        TRY_CAST(s.p ->> 'world_size' AS INTEGER)
    ) END AS n_accelerators,
    {_REPLICA_RANKS} AS replica_ranks,
    -- end_unknown: a log of another tool that does not say how or when the run ended (imported.stop), never taken
    -- for a run still going or killed
    coalesce(stops.status, CASE WHEN (s.p -> 'imported' ->> 'stop') IS NOT NULL THEN 'end_unknown'
                                ELSE 'incomplete' END) AS status,
    CASE
        WHEN stops.status IS NOT NULL THEN stops.reason
        WHEN s.p IS NULL THEN 'no run_start and no run_stop event yet (rank 0 file not ingested?)'
        WHEN (s.p -> 'imported' ->> 'stop') IS NOT NULL THEN s.p -> 'imported' ->> 'stop'
        ELSE 'no run_stop event: the run is still going, or was killed before it could write one'
    END AS reason,
    seen.ranks_seen,
    coalesce(stops.ranks_stopped, 0) AS ranks_stopped,
    s.started_at,
    stops.stopped_at,
    stops.stopped_at - s.started_at - coalesce(stops.paused_s, 0) AS time_to_train_s,
    fin.split, fin.metric, fin.value,
    coalesce(f.path, f0.path) AS source_file,
    s.p AS attrs,
    quality.final_quality,
    stops.energy_j,
    stops.paused_s

FROM seen
LEFT JOIN s USING (run_id)
LEFT JOIN stops USING (run_id)
LEFT JOIN fin USING (run_id)
LEFT JOIN quality USING (run_id)
LEFT JOIN ingested_files f ON f.file_id = s.file_id
LEFT JOIN ingested_files f0 ON f0.file_id = seen.any_file
"""


_COLUMNS = (
    "run_id", "source", "campaign", *(c for c, _, _ in _FROM_RUN_START), "n_accelerators", "replica_ranks",
    "status", "reason", "ranks_seen", "ranks_stopped", "started_at", "stopped_at", "time_to_train_s",
    "final_split", "final_metric", "final_value", "source_file", "attrs", "final_quality", "energy_to_train_j",
    "paused_s",
)  # fmt: skip


def refresh_runs(con: duckdb.DuckDBPyConnection, run_ids: Iterable[str]) -> None:
    """Recompute the ``runs`` rows of ``run_ids`` from their events (call inside the ingest transaction)."""
    ids = sorted(set(run_ids))
    if not ids:
        return
    # A literal list (not a join) lets DuckDB skip the row groups of other runs.
    literal = sql_in_list(ids)
    con.execute(f"DELETE FROM runs WHERE run_id IN {literal}")
    sql = _INSERT.replace("INSERT INTO runs", f"INSERT INTO runs ({', '.join(_COLUMNS)})", 1)
    con.execute(sql.replace("__RUN_IDS__", literal))

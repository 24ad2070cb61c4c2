"""One training recorded two ways: by honestscale's callback (event files) and by the tool's own log (Lightning's
metrics.csv, the Trainer's trainer_state.json), or by two tools' logs (Lightning's TensorBoard and CSV loggers side by
side). Both land as runs; counted twice they would be two repetitions.

How they are told to be one: the log's run (an imported one) and a recorded run whose evaluations hold every one of
the log's, the same split, metric and value (to 1e-9, relative; a TensorBoard scalar is a 32-bit float, so there
the recorded value rounded to 32 bits equals it), two at least. A value logged to 7 or 16
significant digits is a fingerprint of the training, but not of its seed: repetitions with one seed log the same
values, so two records that time every value by the training's clock (the callback's events, TensorBoard, MLflow:
``TIMED``) are one training only where their evaluations overlap in time too. Epochs are not compared (the
Trainer's log counts an evaluation after epoch 1 as 1.0, the callback as epoch 0), nor the times of a log whose
clock is its file's modification time (Lightning's CSV, the Trainer's state), which a copy or a clone resets. The log's run is then superseded by the recorded one (``superseded_runs``:
kept and listed with the reason, in no statistic, verdict or report): the recorded run has the steps, ranks and
clock the log lacks. Of two logs, the one ``PREFERRED`` names first is counted (a wall time on every value).
Runs of other sources (W&B, MLPerf logs) are never matched, nor two logs of one tool (repetitions with one seed may
log the same values).
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

# the records that time every value by the training's own clock: of two of them, one training only where their
# evaluations overlap in time (to CLOCK_S, two processes' clocks on one host); the others' clock is a file's
TIMED = ("native", "tensorboard", "mlflow-sqlite", "mlflow-files")
CLOCK_S = 1.0
# of two records of one training, the one counted: the callback's events (steps, ranks, clock), then the logs with a
# wall time on every value: MLflow's (which records how and when the run ended), TensorBoard's (which does not);
# then those without (Lightning's CSV, the Trainer's state)
PREFERRED = (
    "native",
    "mlflow-sqlite",
    "mlflow-files",
    "tensorboard",
    "lightning-metrics",
    "hf-trainer-state",
)
_MATCH = """
WITH touched AS (SELECT unnest(?::VARCHAR[]) AS run_id),
preferred AS (SELECT unnest(?::VARCHAR[]) AS source, generate_subscripts(?::VARCHAR[], 1) AS rank),
timed AS (SELECT ?::VARCHAR[] AS sources, ?::DOUBLE AS clock_s),
logged AS (SELECT r.run_id, r.source, coalesce(r.campaign, '') AS campaign, p.rank FROM runs r JOIN preferred p USING (source)
           WHERE r.source <> 'native' AND r.run_id NOT IN (SELECT run_id FROM superseded_runs)),
wanted AS (SELECT e.run_id, count(*) AS n FROM evals e JOIN logged USING (run_id) GROUP BY e.run_id),
pairs AS (
    SELECT l.run_id AS logged, n.run_id AS recorded, l.campaign, np.rank, n.source, l.source AS logged_source,
           count(DISTINCT (li.rank, li.seq)) AS matched,
           -- the two records' matched evaluations in time: where they lie, each side
           min(li.time) AS l0, max(li.time) AS l1, min(ni.time) AS n0, max(ni.time) AS n1
    FROM logged l
    JOIN evals li ON li.run_id = l.run_id
    JOIN evals ni ON ni.split = li.split AND ni.metric = li.metric AND ni.run_id <> l.run_id
    JOIN runs n ON n.run_id = ni.run_id
    JOIN preferred np ON np.source = n.source AND np.rank < l.rank
    WHERE (abs(ni.value - li.value) <= 1e-9 * greatest(abs(li.value), 1e-300)
           OR ('tensorboard' IN (l.source, n.source) AND CAST(ni.value AS FLOAT) = CAST(li.value AS FLOAT)))
      AND (l.run_id IN (SELECT run_id FROM touched) OR n.run_id IN (SELECT run_id FROM touched))
    GROUP BY l.run_id, n.run_id, l.campaign, np.rank, n.source, l.source
)
SELECT p.logged, p.recorded, p.campaign, p.matched, p.source FROM pairs p JOIN wanted w ON w.run_id = p.logged, timed t
WHERE p.matched >= 2 AND p.matched = w.n
  -- two records that time every value are one training only where their evaluations overlap in time: seeded
  -- repetitions log equal values, one after the other
  AND (NOT list_contains(t.sources, p.logged_source) OR NOT list_contains(t.sources, p.source)
       OR (p.l0 <= p.n1 + t.clock_s AND p.n0 <= p.l1 + t.clock_s))
ORDER BY p.logged, p.rank, p.recorded
"""


def supersede_twins(con: duckdb.DuckDBPyConnection, run_ids: Iterable[str]) -> list[tuple[str, str, str]]:
    """Mark each log's run that a run of ``run_ids`` (or that is one of ``run_ids``) holds, a recorded run or a log
    preferred to it (PREFERRED), as superseded by it (inside the ingest's transaction); returns the (log's run, run
    counted, why) triples marked."""
    ids = sorted(set(run_ids))
    if not ids:
        return []
    rows = con.execute(_MATCH, [ids, list(PREFERRED), list(PREFERRED), list(TIMED), CLOCK_S]).fetchall()
    first: dict[str, tuple[str, str, str]] = {}
    for logged, recorded, campaign, matched, source in rows:  # the preferred record first
        first.setdefault(
            str(logged), (str(recorded), str(campaign), _reason(str(recorded), int(matched), source))
        )
    if not first:
        return []
    con.executemany(
        "INSERT INTO superseded_runs SELECT ?, ?, ?, current_timestamp",
        [[logged, campaign, why] for logged, (_, campaign, why) in first.items()],
    )
    return [(logged, recorded, why) for logged, (recorded, _, why) in first.items()]


def _reason(recorded: str, matched: int, source: str) -> str:
    by = (
        "which honestscale's callback recorded"
        if source == "native"
        else f"read from another log of it ({source}), which says more: of two logs of one training the one with "
        "a wall time on every value is counted (MLflow's, which records the run's end, then TensorBoard's, then Lightning's CSV, the Trainer's state)"
    )
    return (
        f"the same training as run {recorded}, {by}: every one of this log's "
        f"{matched} evaluations equals one of that run's (split, metric and value); counted once, as that run"
    )

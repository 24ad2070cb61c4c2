"""One training recorded two ways: by honestscale's callback (event files) and by the tool's own log (Lightning's
metrics.csv, the Trainer's trainer_state.json). Both land as runs; counted twice they would be two repetitions.

How they are told to be one: the log's run (an imported one) and a recorded run whose evaluations hold every one of
the log's, the same split, metric and value (to 1e-9, relative; a TensorBoard scalar is a 32-bit float, so there
the recorded value rounded to 32 bits equals it), two at least. A value logged to 7 or 16
significant digits is a fingerprint no other training repeats; epochs are not compared (the Trainer's log counts
an evaluation after epoch 1 as 1.0, the callback as epoch 0), nor times (a log's clock is its file's modification
time, which a copy or a clone resets). The log's run is then superseded by the recorded one (``superseded_runs``:
kept and listed with the reason, in no statistic, verdict or report): the recorded run has the steps, ranks and
clock the log lacks. Runs of other sources are never matched.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

# tools whose trainings the callbacks record
LOGGED_BY_CALLBACKS = (
    "lightning-metrics",
    "hf-trainer-state",
    "tensorboard",
    "mlflow-sqlite",
    "mlflow-files",
)
_MATCH = """
WITH touched AS (SELECT unnest(?::VARCHAR[]) AS run_id),
logged AS (SELECT run_id, source, coalesce(campaign, '') AS campaign FROM runs WHERE source IN (SELECT unnest(?::VARCHAR[]))
           AND run_id NOT IN (SELECT run_id FROM superseded_runs)),
wanted AS (SELECT e.run_id, count(*) AS n FROM evals e JOIN logged USING (run_id) GROUP BY e.run_id),
pairs AS (
    SELECT l.run_id AS logged, n.run_id AS recorded, l.campaign, count(DISTINCT (li.rank, li.seq)) AS matched
    FROM logged l
    JOIN evals li ON li.run_id = l.run_id
    JOIN evals ni ON ni.split = li.split AND ni.metric = li.metric
                 AND (abs(ni.value - li.value) <= 1e-9 * greatest(abs(li.value), 1e-300)
                      OR (l.source = 'tensorboard' AND CAST(ni.value AS FLOAT) = CAST(li.value AS FLOAT)))
    JOIN runs n ON n.run_id = ni.run_id AND n.source = 'native'
    WHERE l.run_id IN (SELECT run_id FROM touched) OR n.run_id IN (SELECT run_id FROM touched)
    GROUP BY l.run_id, n.run_id, l.campaign
)
SELECT p.logged, p.recorded, p.campaign, p.matched FROM pairs p JOIN wanted w ON w.run_id = p.logged
WHERE p.matched >= 2 AND p.matched = w.n
ORDER BY p.logged, p.recorded
"""


def supersede_twins(con: duckdb.DuckDBPyConnection, run_ids: Iterable[str]) -> list[tuple[str, str]]:
    """Mark each log's run that a recorded run of ``run_ids`` (or that is one of ``run_ids``) holds as superseded
    by it (inside the ingest's transaction); returns the (log's run, recorded run) pairs marked."""
    ids = sorted(set(run_ids))
    if not ids:
        return []
    rows = con.execute(_MATCH, [ids, list(LOGGED_BY_CALLBACKS)]).fetchall()
    first: dict[str, tuple[str, str, int]] = {}
    for logged, recorded, campaign, matched in rows:
        first.setdefault(str(logged), (str(recorded), str(campaign), int(matched)))
    if not first:
        return []
    con.executemany(
        "INSERT INTO superseded_runs SELECT ?, ?, ?, current_timestamp",
        [
            [logged, campaign, _reason(recorded, matched)]
            for logged, (recorded, campaign, matched) in first.items()
        ],
    )
    return [(logged, recorded) for logged, (recorded, _, _) in first.items()]


def _reason(recorded: str, matched: int) -> str:
    return (
        f"the same training as run {recorded}, which honestscale's callback recorded: every one of this log's "
        f"{matched} evaluations equals one of that run's (split, metric and value); counted once, as that run"
    )

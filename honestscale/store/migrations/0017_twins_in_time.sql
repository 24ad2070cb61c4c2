-- honestscale store, migration 0017: two records of equal values are one training only where they overlap in time.
--
-- A log's run was superseded by another record whose evaluations held every one of its values; seeded repetitions
-- log equal values, so two trainings with one seed (an MLflow SQLite run and a file-store run, hours apart) were
-- counted as one and a repetition was lost. Where both records time every value by the training's clock (the
-- callback's events, TensorBoard, MLflow), they are one training only where their evaluations overlap in time (to
-- 1 s, collector/_twins.py); the rows of stored pairs that do not are removed, and the run counts again.
DELETE FROM superseded_runs WHERE run_id IN (
    SELECT s.run_id
    FROM superseded_runs s
    JOIN runs l ON l.run_id = s.run_id
    JOIN runs n ON n.run_id = regexp_extract(s.reason, '^the same training as run (.+?), ', 1)
    JOIN (SELECT run_id, min(time) AS t0, max(time) AS t1 FROM evals GROUP BY run_id) a ON a.run_id = l.run_id
    JOIN (SELECT run_id, min(time) AS t0, max(time) AS t1 FROM evals GROUP BY run_id) b ON b.run_id = n.run_id
    WHERE l.source IN ('native', 'tensorboard', 'mlflow-sqlite', 'mlflow-files')
      AND n.source IN ('native', 'tensorboard', 'mlflow-sqlite', 'mlflow-files')
      AND NOT (a.t0 <= b.t1 + 1.0 AND b.t0 <= a.t1 + 1.0)
);

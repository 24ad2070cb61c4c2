-- honestscale store, migration 0016: a resumed training's pause is a column beside its time to train.
--
-- runs.paused_s: the seconds between the launches of a resumed training (run_stop's paused_s, contract 6),
-- which time_to_train_s already leaves out; kept so that every page that shows the time can say it is not
-- run_start to run_stop. NULL: one launch, or a pause not recorded.
ALTER TABLE runs ADD COLUMN paused_s DOUBLE;
UPDATE runs SET paused_s = p.paused_s FROM (
    SELECT run_id, max(TRY_CAST(payload ->> 'paused_s' AS DOUBLE)) AS paused_s
    FROM markers WHERE kind = 'run_stop' GROUP BY run_id
) p WHERE p.run_id = runs.run_id AND p.paused_s IS NOT NULL;

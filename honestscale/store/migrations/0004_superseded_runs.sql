-- honestscale store, migration 0004: runs an edited campaign spec superseded.
--
-- A run's id carries a hash of what defines it (framework, workers, runner options, seed, scaling, tuning);
-- when `campaign run` records a spec whose plan no longer holds a series of runs the earlier spec planned,
-- those runs are kept and listed here with what changed. No statistic, verdict or report uses them; `runs`
-- shows them with the reason. A spec changed back un-supersedes them.
CREATE TABLE superseded_runs (
    run_id VARCHAR PRIMARY KEY,
    campaign VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    superseded_at TIMESTAMP NOT NULL
);

-- Energy measured outside a run's own events: CodeCarbon's emissions.csv rows and Slurm accounting (sacct) lines,
-- one row per record, joined to runs when read (analysis/energy.py): by Slurm job id, else by time window.
-- energy_j NULL: not measured (a counter that read 0 or is missing), never 0 J. Times: epoch seconds.
CREATE TABLE IF NOT EXISTS energy_records (
    file_id INTEGER NOT NULL, line INTEGER NOT NULL, format VARCHAR NOT NULL,
    job_id VARCHAR, step_id VARCHAR, host VARCHAR, nodes INTEGER,
    started_at DOUBLE, stopped_at DOUBLE, energy_j DOUBLE,
    method VARCHAR NOT NULL,  -- how the energy was had: "measured (...)", "estimated (...)", "not measured (...)"
    state VARCHAR, details JSON
);

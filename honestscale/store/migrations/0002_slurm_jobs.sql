-- honestscale store, migration 0002: campaigns submitted to Slurm.
-- One row per run submitted (an array task is one run): the job, the exact script, and the last state seen.
CREATE TABLE slurm_jobs (
    campaign      VARCHAR NOT NULL,
    run_id        VARCHAR NOT NULL,
    job_id        VARCHAR NOT NULL,     -- "123" or, for an array task, "123_4"
    point         VARCHAR NOT NULL,
    script        VARCHAR NOT NULL,     -- the sbatch script exactly as submitted
    submitted_at  TIMESTAMP NOT NULL,
    state         VARCHAR,              -- last Slurm state seen: PENDING, RUNNING, COMPLETED, TIMEOUT, CANCELLED, FAILED, ...
    reason        VARCHAR,
    exit_code     VARCHAR,
    updated_at    TIMESTAMP,
    PRIMARY KEY (campaign, run_id, job_id)
);

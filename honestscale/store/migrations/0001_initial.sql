-- honestscale store, migration 0001: the initial schema.
-- Every table the collector writes; lint and report read them through honestscale.store.queries only.

CREATE TABLE campaigns (
    name        VARCHAR PRIMARY KEY,
    created_at  TIMESTAMP DEFAULT current_timestamp,
    spec        JSON,          -- the campaign spec as submitted (later issues)
    notes       VARCHAR
);

-- One row per input file: how far it has been read, so that ingest is idempotent and incremental.
CREATE TABLE ingested_files (
    file_id            INTEGER PRIMARY KEY,
    path               VARCHAR NOT NULL UNIQUE,   -- absolute path
    format             VARCHAR NOT NULL,          -- native | mlperf
    campaign           VARCHAR,                   -- ingest --campaign: for runs whose run_start names none
    size_bytes         BIGINT,                    -- size on disk when last read
    mtime_ns           BIGINT,
    bytes_ingested     BIGINT NOT NULL,           -- of the (decompressed) content, up to the last complete line
    lines_ingested     BIGINT NOT NULL,
    content_hash       VARCHAR NOT NULL,          -- blake2b of the first bytes_ingested bytes
    events             BIGINT NOT NULL DEFAULT 0, -- events that landed from this file
    duplicates         BIGINT NOT NULL DEFAULT 0, -- events already in the store (same run, rank, seq)
    quarantined        BIGINT NOT NULL DEFAULT 0, -- lines of this file now in the quarantine
    other_lines        BIGINT NOT NULL DEFAULT 0, -- MLPerf logs: lines of other output around :::MLLOG lines
    first_ingested_at  TIMESTAMP NOT NULL,
    last_ingested_at   TIMESTAMP NOT NULL,
    note               VARCHAR                    -- e.g. 'empty file', 'systems/C4140.json'
);

-- History: one row per file per ingest that changed something.
CREATE TABLE ingest_log (
    ingested_at        TIMESTAMP NOT NULL,
    file_id            INTEGER NOT NULL,
    path               VARCHAR NOT NULL,
    action             VARCHAR NOT NULL,          -- new | grown | rewritten | forced
    events_added       BIGINT NOT NULL,
    duplicates         BIGINT NOT NULL,
    quarantined        BIGINT NOT NULL,
    seconds            DOUBLE NOT NULL,
    honestscale_version VARCHAR NOT NULL
);

-- Every event that landed. Dedup key: (run_id, rank, seq). The typed tables below hold the
-- kind-specific fields; payload keeps the whole event for run_start/run_stop and for any event
-- carrying fields beyond the contract, so nothing a runner wrote is lost.
CREATE TABLE events (
    run_id   VARCHAR NOT NULL,
    rank     INTEGER NOT NULL,
    seq      BIGINT  NOT NULL,
    time     DOUBLE  NOT NULL,
    kind     VARCHAR NOT NULL,
    file_id  INTEGER NOT NULL,
    line     BIGINT  NOT NULL,
    payload  JSON
);

-- run_start and run_stop events again, with their payload: the runs projection reads this small
-- table instead of scanning every event.
CREATE TABLE markers (
    run_id   VARCHAR NOT NULL,
    rank     INTEGER NOT NULL,
    seq      BIGINT  NOT NULL,
    time     DOUBLE  NOT NULL,
    kind     VARCHAR NOT NULL,
    file_id  INTEGER NOT NULL,
    payload  JSON NOT NULL
);

-- Per run and rank: how many events landed and their seq/time range (dedup fast path, gap detection,
-- ranks seen), kept up to date as files land so that nothing needs to scan all events.
CREATE TABLE run_ranks (
    run_id      VARCHAR NOT NULL,
    rank        INTEGER NOT NULL,
    events      BIGINT  NOT NULL,
    first_seq   BIGINT  NOT NULL,
    last_seq    BIGINT  NOT NULL,
    first_time  DOUBLE  NOT NULL,
    last_time   DOUBLE  NOT NULL,
    file_id     INTEGER NOT NULL,       -- a file that holds events of this rank
    PRIMARY KEY (run_id, rank)
);

CREATE TABLE steps (
    run_id VARCHAR NOT NULL, rank INTEGER NOT NULL, seq BIGINT NOT NULL, time DOUBLE NOT NULL,
    epoch BIGINT, step BIGINT NOT NULL, samples BIGINT NOT NULL,
    t_total DOUBLE NOT NULL, t_data DOUBLE, t_compute DOUBLE, t_comm DOUBLE, t_optimizer DOUBLE,
    comm_measured BOOLEAN, warmup BOOLEAN
);

CREATE TABLE epochs (
    run_id VARCHAR NOT NULL, rank INTEGER NOT NULL, seq BIGINT NOT NULL, time DOUBLE NOT NULL,
    epoch BIGINT NOT NULL, train_loss DOUBLE, train_accuracy DOUBLE, samples BIGINT, t_total DOUBLE
);

CREATE TABLE evals (
    run_id VARCHAR NOT NULL, rank INTEGER NOT NULL, seq BIGINT NOT NULL, time DOUBLE NOT NULL,
    split VARCHAR NOT NULL, metric VARCHAR NOT NULL, value DOUBLE NOT NULL, samples BIGINT, epoch BIGINT
);

CREATE TABLE system_samples (
    run_id VARCHAR NOT NULL, rank INTEGER NOT NULL, seq BIGINT NOT NULL, time DOUBLE NOT NULL,
    device BIGINT, accel_util DOUBLE, accel_mem_bytes BIGINT, power_w DOUBLE, energy_j DOUBLE,
    cpu_percent DOUBLE, rss_bytes BIGINT, host_load DOUBLE
);

-- One row per run, derived from its events (recomputed whenever a file touching the run lands).
CREATE TABLE runs (
    run_id                VARCHAR PRIMARY KEY,
    source                VARCHAR NOT NULL,       -- native | mlperf
    campaign              VARCHAR,
    name                  VARCHAR,
    purpose               VARCHAR,
    tuning_study          VARCHAR,
    tuning_trial          VARCHAR,
    framework             VARCHAR,
    framework_version     VARCHAR,
    launcher              VARCHAR,
    backend               VARCHAR,
    world_size            INTEGER,
    n_nodes               INTEGER,
    accelerators_per_node INTEGER,
    n_accelerators        INTEGER,
    accelerator           VARCHAR,
    system                VARCHAR,
    host                  VARCHAR,
    cpu                   VARCHAR,
    interconnect          VARCHAR,
    software              JSON,
    model                 VARCHAR,
    model_params          BIGINT,
    dataset               VARCHAR,
    train_size            BIGINT,
    validation_size       BIGINT,
    test_size             BIGINT,
    data_source           VARCHAR,
    data_path             VARCHAR,
    input_shape           JSON,
    global_batch_size     BIGINT,
    local_batch_size      BIGINT,
    optimizer             VARCHAR,
    learning_rate         DOUBLE,
    lr_schedule           VARCHAR,
    precision             VARCHAR,
    grad_compression      VARCHAR,
    seed                  BIGINT,
    stop_criterion        VARCHAR,
    stop_value            DOUBLE,
    target_metric         VARCHAR,
    scope                 VARCHAR,
    scaling               VARCHAR,
    config_hash           VARCHAR,
    git_commit            VARCHAR,
    slurm_job_id          VARCHAR,
    slurm_step_id         VARCHAR,
    status                VARCHAR NOT NULL,       -- success | aborted | failed | timeout | cancelled | incomplete
    reason                VARCHAR,
    ranks_seen            INTEGER NOT NULL,       -- ranks that wrote at least one event
    ranks_stopped         INTEGER NOT NULL,       -- ranks that wrote run_stop
    started_at            DOUBLE,                 -- epoch seconds: earliest run_start
    stopped_at            DOUBLE,                 -- epoch seconds: latest run_stop
    time_to_train_s       DOUBLE,                 -- stopped_at - started_at
    final_split           VARCHAR,                -- the final accuracy: last eval of the best split (test > validation > train)
    final_metric          VARCHAR,
    final_value           DOUBLE,
    source_file           VARCHAR,                -- the file holding the run_start of the lowest rank
    attrs                 JSON                    -- the whole run_start event of the lowest rank
);

-- Every line that could not land, with why. Nothing is skipped silently.
CREATE TABLE quarantine (
    file_id         INTEGER NOT NULL,
    path            VARCHAR NOT NULL,
    line            BIGINT NOT NULL,
    reason          VARCHAR NOT NULL,
    raw             VARCHAR NOT NULL,       -- the line (non-UTF-8 bytes backslash-escaped; cut at 64 KiB)
    raw_length      BIGINT NOT NULL,        -- its length in bytes before any cut
    is_tail         BOOLEAN NOT NULL,       -- an unterminated last line: re-read when the file grows
    quarantined_at  TIMESTAMP NOT NULL
);

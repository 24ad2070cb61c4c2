-- PyTorch profiler (Kineto) traces: per profiled step, where its time went, as evidence beside a run (never a
-- run of its own). run_id: the run the trace belongs to, where its place says (a torchtitan dump folder); NULL
-- when none is known. Times in seconds; t_busy/t_idle/t_comm_exposed NULL on a CPU-only trace.
CREATE TABLE IF NOT EXISTS profile_steps (
    file_id INTEGER NOT NULL, run_id VARCHAR, rank INTEGER, world_size INTEGER, backend VARCHAR, device VARCHAR,
    step BIGINT NOT NULL, t_step DOUBLE NOT NULL, t_busy DOUBLE, t_idle DOUBLE, t_comm DOUBLE, t_comm_exposed DOUBLE,
    comm_by_kind JSON
);

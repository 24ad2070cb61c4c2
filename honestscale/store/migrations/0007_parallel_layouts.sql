-- honestscale store, migration 0007: the parallel layout of a run and the tokens of its steps (event contract 3).
--
-- runs.parallel: degrees per dimension (dp, fsdp, tp, pp, cp, ep) as run_start wrote them; runs.replica_ranks:
-- the ranks that process one data-parallel replica's samples together (tp x pp x cp), by which every sum of
-- samples or tokens over ranks is divided (a tensor-parallel group processes a token once, not once per rank);
-- 1 where the run recorded no layout (data parallel over every rank). steps.tokens: tokens a rank processed in the
-- step. Runs that landed before this migration get the layout from their run_start (runs.attrs).
ALTER TABLE runs ADD COLUMN parallel JSON;
ALTER TABLE runs ADD COLUMN replica_ranks INTEGER DEFAULT 1;
ALTER TABLE runs ADD COLUMN pipeline_schedule VARCHAR;
ALTER TABLE runs ADD COLUMN microbatches INTEGER;
ALTER TABLE runs ADD COLUMN sequence_length INTEGER;
ALTER TABLE runs ADD COLUMN global_batch_tokens BIGINT;
ALTER TABLE runs ADD COLUMN activation_checkpointing VARCHAR;
ALTER TABLE runs ADD COLUMN compute_dtype VARCHAR;
ALTER TABLE runs ADD COLUMN params_total BIGINT;
ALTER TABLE runs ADD COLUMN params_embedding BIGINT;
ALTER TABLE runs ADD COLUMN params_active BIGINT;
ALTER TABLE steps ADD COLUMN tokens BIGINT;
UPDATE runs SET
    parallel = attrs -> 'parallel',
    -- a degree that is not a positive JSON integer counts as 1, as the projection reads it
    replica_ranks = (CASE WHEN json_type(attrs -> 'parallel' -> 'tp') = 'UBIGINT'
                          THEN greatest(TRY_CAST(attrs -> 'parallel' ->> 'tp' AS INTEGER), 1) ELSE 1 END)
        * (CASE WHEN json_type(attrs -> 'parallel' -> 'pp') = 'UBIGINT'
                THEN greatest(TRY_CAST(attrs -> 'parallel' ->> 'pp' AS INTEGER), 1) ELSE 1 END)
        * (CASE WHEN json_type(attrs -> 'parallel' -> 'cp') = 'UBIGINT'
                THEN greatest(TRY_CAST(attrs -> 'parallel' ->> 'cp' AS INTEGER), 1) ELSE 1 END),
    pipeline_schedule = attrs ->> 'pipeline_schedule',
    microbatches = TRY_CAST(attrs ->> 'microbatches' AS INTEGER),
    sequence_length = TRY_CAST(attrs ->> 'sequence_length' AS INTEGER),
    global_batch_tokens = TRY_CAST(attrs ->> 'global_batch_tokens' AS BIGINT),
    activation_checkpointing = attrs ->> 'activation_checkpointing',
    compute_dtype = attrs ->> 'compute_dtype',
    params_total = TRY_CAST(attrs ->> 'params_total' AS BIGINT),
    params_embedding = TRY_CAST(attrs ->> 'params_embedding' AS BIGINT),
    params_active = TRY_CAST(attrs ->> 'params_active' AS BIGINT)
WHERE attrs IS NOT NULL;

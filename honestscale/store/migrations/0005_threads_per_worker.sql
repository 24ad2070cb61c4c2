-- honestscale store, migration 0005: the threads each rank ran and the CPUs it could run on (event contract 2).
--
-- runs.intra_op_threads / inter_op_threads: the threads one operator may use, and the operators run at once, in
-- the lowest rank, as its framework reported them (0: the framework chooses); runs.cpus_allowed and cpu_affinity:
-- the CPUs that rank could run on; runs.launch_env: the threading and affinity knobs set in its environment. A run
-- recorded before contract 2 has none of them: unknown (NULL), never 0. The runs that landed before this
-- migration get them from their run_start (runs.attrs), where a runner recorded them as extra fields.
ALTER TABLE runs ADD COLUMN intra_op_threads INTEGER;
ALTER TABLE runs ADD COLUMN inter_op_threads INTEGER;
ALTER TABLE runs ADD COLUMN cpus_allowed INTEGER;
ALTER TABLE runs ADD COLUMN cpu_affinity JSON;
ALTER TABLE runs ADD COLUMN launch_env JSON;
UPDATE runs SET
    intra_op_threads = TRY_CAST(attrs ->> 'intra_op_threads' AS INTEGER),
    inter_op_threads = TRY_CAST(attrs ->> 'inter_op_threads' AS INTEGER),
    cpus_allowed = TRY_CAST(attrs ->> 'cpus_allowed' AS INTEGER),
    cpu_affinity = attrs -> 'cpu_affinity',
    launch_env = attrs -> 'launch_env'
WHERE attrs IS NOT NULL;

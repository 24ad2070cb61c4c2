-- honestscale store, migration 0006: a CPU-only run has no accelerators.
--
-- runs.n_accelerators was the worker count where a run's run_start said 0 accelerators per node (the processes
-- counted as devices), so a CPU run showed "n_accelerators 2" beside "accelerators_per_node 0". It is 0 now, as
-- the projection computes it for runs that land from now on; their workers are world_size.
UPDATE runs SET n_accelerators = 0 WHERE accelerators_per_node = 0;

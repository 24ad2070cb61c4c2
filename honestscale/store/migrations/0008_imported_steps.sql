-- Contract 4: a step read from another tool's log may not count its samples (torchtitan's system logs count
-- tokens only): unknown, never 0. Sums over steps skip it; a run none of whose steps count samples has no
-- samples/s.
ALTER TABLE steps ALTER COLUMN samples DROP NOT NULL;
-- Contract 4: a step event of such a log may cover several optimizer steps (one line per log_interval).
ALTER TABLE steps ADD COLUMN iterations INTEGER;

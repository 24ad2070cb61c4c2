-- One row that every ingest transaction updates: on a DuckLake store, two writers whose transactions overlap then
-- conflict at commit (both deleted the same row), and the later one lands its files again from what the earlier
-- one committed, so a file is never landed twice. On a DuckDB file (one writer at a time) it only counts.
CREATE TABLE IF NOT EXISTS store_writes (n BIGINT NOT NULL);
INSERT INTO store_writes SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM store_writes);

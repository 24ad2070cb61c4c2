-- honestscale store, migration 0015: a step event is stored once, in steps (it was also a row of events: nine
-- tenths of a run's events are steps, and every one was written twice).
--
-- steps.file_id, line, payload, digest: what events held of a step (its file and line, the whole line where it
-- carries fields beyond the contract, the hash of its bytes that tells a duplicate from a conflict).
-- nonstep_events: every other event, as events held it. events is now a view over the two: every event once,
-- with the same columns as before, so queries of events read what they read before.
ALTER TABLE steps ADD COLUMN file_id INTEGER;
ALTER TABLE steps ADD COLUMN line BIGINT;
ALTER TABLE steps ADD COLUMN payload JSON;
ALTER TABLE steps ADD COLUMN digest UBIGINT;
UPDATE steps SET file_id = e.file_id, line = e.line, payload = e.payload, digest = e.digest
FROM events e WHERE e.kind = 'step' AND e.run_id = steps.run_id AND e.rank = steps.rank AND e.seq = steps.seq;
CREATE TABLE nonstep_events (
    run_id   VARCHAR NOT NULL,
    rank     INTEGER NOT NULL,
    seq      BIGINT  NOT NULL,
    time     DOUBLE  NOT NULL,
    kind     VARCHAR NOT NULL,
    file_id  INTEGER NOT NULL,
    line     BIGINT  NOT NULL,
    payload  JSON,
    digest   UBIGINT
);
INSERT INTO nonstep_events SELECT run_id, rank, seq, time, kind, file_id, line, payload, digest FROM events
WHERE kind <> 'step';
DROP TABLE events;
CREATE VIEW events AS
SELECT run_id, rank, seq, time, kind, file_id, line, payload, digest FROM nonstep_events
UNION ALL
SELECT run_id, rank, seq, time, 'step' AS kind, file_id, line, payload, digest FROM steps;

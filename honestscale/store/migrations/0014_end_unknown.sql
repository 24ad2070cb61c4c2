-- A run read from a log that does not say how or when it ended (run_start.imported.stop: Lightning's metrics.csv,
-- a console log cut without its end) is "end_unknown", no longer "incomplete" (the word for a run still going or
-- killed before its run_stop). The runs projection says so from now on; this puts the runs already stored right.
UPDATE runs SET status = 'end_unknown'
WHERE status = 'incomplete' AND (attrs -> 'imported' ->> 'stop') IS NOT NULL;

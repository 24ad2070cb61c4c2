-- honestscale store, migration 0003: conflicts are told from duplicates; every final quality; energy to train.
--
-- events.digest: a hash of the event line as it arrived. An event whose (run_id, rank, seq) is already
-- stored is a duplicate when its digest is the same (the same bytes) and a conflict when it differs;
-- events stored before this migration have no digest and are compared on time and kind.
ALTER TABLE events ADD COLUMN digest UBIGINT;

-- runs.final_quality: the last value of every metric of the final split, {metric: value} (Mask R-CNN
-- has bbox_mAP and segm_mAP; final_metric / final_value keep the run's target metric).
ALTER TABLE runs ADD COLUMN final_quality JSON;
-- runs.energy_to_train_j: the run's energy between run_start and run_stop, joules, where it was measured
-- (MLPerf power logs); beside time_to_train_s.
ALTER TABLE runs ADD COLUMN energy_to_train_j DOUBLE;

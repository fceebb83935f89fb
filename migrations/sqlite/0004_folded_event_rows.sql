-- From this version on, a row of a2a_task_events may hold a run of consecutive
-- artifact-update events of one append ("folded rows", src/store/sql.rs): its seq is
-- the number of the run's last event and its event text the events' JSON texts joined
-- by commas. Existing rows (one event each) are already in that form, so nothing is
-- rewritten; this migration only marks the database, so that an older a2a-gateway,
-- which would read a folded row as one event, refuses it instead (its migrator finds a
-- migration it does not know).
UPDATE a2a_task_events SET kind = kind WHERE 0;

-- The event log as a WITHOUT ROWID table: each row lives in the b-tree of its
-- primary key (tenant, owner, task_id, seq) instead of in a rowid table plus a
-- separate index on that key, so appending an event writes one b-tree, not two.
-- Event rows are small next to a page (a status or a chunk is a few hundred bytes);
-- larger ones spill to overflow pages as in any table.

CREATE TABLE a2a_task_events_v2 (
    tenant          TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    task_id         TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    folds_artifacts INTEGER NOT NULL,
    event           TEXT    NOT NULL,
    created_ms      INTEGER NOT NULL,
    PRIMARY KEY (tenant, owner, task_id, seq)
) WITHOUT ROWID;

INSERT INTO a2a_task_events_v2
    (tenant, owner, task_id, seq, kind, folds_artifacts, event, created_ms)
SELECT tenant, owner, task_id, seq, kind, folds_artifacts, event, created_ms
FROM a2a_task_events;

DROP TABLE a2a_task_events;
ALTER TABLE a2a_task_events_v2 RENAME TO a2a_task_events;

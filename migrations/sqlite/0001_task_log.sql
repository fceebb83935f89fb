-- Task store on an append-only event log (see src/store/sql.rs for the layout).
-- Every key starts with (tenant, owner): a caller's rows are reached only through them.

CREATE TABLE a2a_tasks (
    tenant        TEXT    NOT NULL,
    owner         TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    context_id    TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    -- status timestamp, milliseconds since the Unix epoch (0 when unset)
    status_ms     INTEGER NOT NULL,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    last_seq      INTEGER NOT NULL,
    -- the projection of the log without artifacts (JSON text)
    snapshot      TEXT    NOT NULL,
    -- a2a_task_artifacts holds the artifacts folded up to art_seq (art_bytes long);
    -- pending_bytes counts artifact event bytes after it
    art_seq       INTEGER NOT NULL,
    art_bytes     INTEGER NOT NULL,
    pending_bytes INTEGER NOT NULL,
    PRIMARY KEY (tenant, owner, id)
);

-- ListTasks keyset order within a scope.
CREATE INDEX a2a_tasks_by_status_time ON a2a_tasks (tenant, owner, status_ms DESC, id);
-- Recovery, retention and INPUT_REQUIRED expiry across scopes.
CREATE INDEX a2a_tasks_by_state ON a2a_tasks (state, status_ms);

CREATE TABLE a2a_task_artifacts (
    tenant    TEXT NOT NULL,
    owner     TEXT NOT NULL,
    task_id   TEXT NOT NULL,
    -- JSON: null or an array of artifacts
    artifacts TEXT NOT NULL,
    PRIMARY KEY (tenant, owner, task_id)
);

CREATE TABLE a2a_task_events (
    tenant          TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    task_id         TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    folds_artifacts INTEGER NOT NULL,
    event           TEXT    NOT NULL,
    created_ms      INTEGER NOT NULL,
    PRIMARY KEY (tenant, owner, task_id, seq)
);

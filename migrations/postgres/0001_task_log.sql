-- Task store on an append-only event log (see src/store/sql.rs for the layout).
-- Every key starts with (tenant, owner): a caller's rows are reached only through them.
-- Text keys use the "C" collation so that ids order bytewise, as the page cursor does.

CREATE TABLE a2a_tasks (
    tenant        TEXT COLLATE "C" NOT NULL,
    owner         TEXT COLLATE "C" NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    context_id    TEXT COLLATE "C" NOT NULL,
    state         TEXT COLLATE "C" NOT NULL,
    -- status timestamp, milliseconds since the Unix epoch (0 when unset)
    status_ms     BIGINT NOT NULL,
    created_ms    BIGINT NOT NULL,
    updated_ms    BIGINT NOT NULL,
    last_seq      BIGINT NOT NULL,
    -- the projection of the log without artifacts (JSON text)
    snapshot      TEXT   NOT NULL,
    -- a2a_task_artifacts holds the artifacts folded up to art_seq (art_bytes long);
    -- pending_bytes counts artifact event bytes after it
    art_seq       BIGINT NOT NULL,
    art_bytes     BIGINT NOT NULL,
    pending_bytes BIGINT NOT NULL,
    PRIMARY KEY (tenant, owner, id)
);

-- ListTasks keyset order within a scope.
CREATE INDEX a2a_tasks_by_status_time ON a2a_tasks (tenant, owner, status_ms DESC, id);
-- Recovery, retention and INPUT_REQUIRED expiry across scopes.
CREATE INDEX a2a_tasks_by_state ON a2a_tasks (state, status_ms);

CREATE TABLE a2a_task_artifacts (
    tenant    TEXT COLLATE "C" NOT NULL,
    owner     TEXT COLLATE "C" NOT NULL,
    task_id   TEXT COLLATE "C" NOT NULL,
    -- JSON: null or an array of artifacts
    artifacts TEXT NOT NULL,
    PRIMARY KEY (tenant, owner, task_id)
);

CREATE TABLE a2a_task_events (
    tenant          TEXT COLLATE "C" NOT NULL,
    owner           TEXT COLLATE "C" NOT NULL,
    task_id         TEXT COLLATE "C" NOT NULL,
    seq             BIGINT  NOT NULL,
    kind            TEXT    NOT NULL,
    folds_artifacts INTEGER NOT NULL,
    event           TEXT    NOT NULL,
    created_ms      BIGINT  NOT NULL,
    PRIMARY KEY (tenant, owner, task_id, seq)
);

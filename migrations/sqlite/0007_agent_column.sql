-- The agent of the gateway a row belongs to (`[agents.<id>]`, docs/agents.md) gets a
-- column of its own in every table keyed by a caller's scope, first in its primary key:
-- '' is the agent at `/`. Releases before this migration kept a named agent's rows under
-- the tenant "<agent>" || char(31) || "<tenant>" (U+001F, which neither an agent id nor
-- a tenant can hold); those rows are split into their agent and tenant here, so every
-- task, event, push config, queued delivery and upstream link stays reachable through
-- its agent. Every other row belongs to the agent at `/`.
-- A new primary key needs a new table in SQLite: each table is copied into its new
-- form, dropped and replaced (the columns as in 0001-0006, `agent` first), all in the
-- one transaction of this migration.

CREATE TABLE a2a_tasks_v7 (
    agent         TEXT    NOT NULL DEFAULT '',
    tenant        TEXT    NOT NULL,
    owner         TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    context_id    TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    status_ms     INTEGER NOT NULL,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    last_seq      INTEGER NOT NULL,
    snapshot      TEXT    NOT NULL,
    art_seq       INTEGER NOT NULL,
    art_bytes     INTEGER NOT NULL,
    pending_bytes INTEGER NOT NULL,
    PRIMARY KEY (agent, tenant, owner, id)
);
INSERT INTO a2a_tasks_v7 (agent, tenant, owner, id, context_id, state, status_ms, created_ms, updated_ms, last_seq, snapshot, art_seq, art_bytes, pending_bytes)
SELECT CASE WHEN instr(tenant, char(31)) > 0 THEN substr(tenant, 1, instr(tenant, char(31)) - 1) ELSE '' END,
       substr(tenant, instr(tenant, char(31)) + 1),
       owner, id, context_id, state, status_ms, created_ms, updated_ms, last_seq, snapshot, art_seq, art_bytes, pending_bytes
FROM a2a_tasks;
DROP TABLE a2a_tasks;
ALTER TABLE a2a_tasks_v7 RENAME TO a2a_tasks;

CREATE TABLE a2a_task_artifacts_v7 (
    agent     TEXT NOT NULL DEFAULT '',
    tenant    TEXT NOT NULL,
    owner     TEXT NOT NULL,
    task_id   TEXT NOT NULL,
    artifacts TEXT NOT NULL,
    PRIMARY KEY (agent, tenant, owner, task_id)
);
INSERT INTO a2a_task_artifacts_v7 (agent, tenant, owner, task_id, artifacts)
SELECT CASE WHEN instr(tenant, char(31)) > 0 THEN substr(tenant, 1, instr(tenant, char(31)) - 1) ELSE '' END,
       substr(tenant, instr(tenant, char(31)) + 1),
       owner, task_id, artifacts
FROM a2a_task_artifacts;
DROP TABLE a2a_task_artifacts;
ALTER TABLE a2a_task_artifacts_v7 RENAME TO a2a_task_artifacts;

CREATE TABLE a2a_task_events_v7 (
    agent           TEXT    NOT NULL DEFAULT '',
    tenant          TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    task_id         TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    folds_artifacts INTEGER NOT NULL,
    event           TEXT    NOT NULL,
    created_ms      INTEGER NOT NULL,
    PRIMARY KEY (agent, tenant, owner, task_id, seq)
) WITHOUT ROWID;
INSERT INTO a2a_task_events_v7 (agent, tenant, owner, task_id, seq, kind, folds_artifacts, event, created_ms)
SELECT CASE WHEN instr(tenant, char(31)) > 0 THEN substr(tenant, 1, instr(tenant, char(31)) - 1) ELSE '' END,
       substr(tenant, instr(tenant, char(31)) + 1),
       owner, task_id, seq, kind, folds_artifacts, event, created_ms
FROM a2a_task_events;
DROP TABLE a2a_task_events;
ALTER TABLE a2a_task_events_v7 RENAME TO a2a_task_events;

CREATE TABLE a2a_push_configs_v7 (
    agent            TEXT    NOT NULL DEFAULT '',
    tenant           TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    task_id          TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    url              TEXT    NOT NULL,
    token            TEXT,
    auth_scheme      TEXT,
    auth_credentials TEXT,
    enabled          INTEGER NOT NULL,
    failures         INTEGER NOT NULL,
    last_error       TEXT,
    created_ms       INTEGER NOT NULL,
    PRIMARY KEY (agent, tenant, owner, task_id, id)
) WITHOUT ROWID;
INSERT INTO a2a_push_configs_v7 (agent, tenant, owner, task_id, id, url, token, auth_scheme, auth_credentials, enabled, failures, last_error, created_ms)
SELECT CASE WHEN instr(tenant, char(31)) > 0 THEN substr(tenant, 1, instr(tenant, char(31)) - 1) ELSE '' END,
       substr(tenant, instr(tenant, char(31)) + 1),
       owner, task_id, id, url, token, auth_scheme, auth_credentials, enabled, failures, last_error, created_ms
FROM a2a_push_configs;
DROP TABLE a2a_push_configs;
ALTER TABLE a2a_push_configs_v7 RENAME TO a2a_push_configs;

CREATE TABLE a2a_push_outbox_v7 (
    agent      TEXT    NOT NULL DEFAULT '',
    tenant     TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    task_id    TEXT    NOT NULL,
    config_id  TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    next_ms    INTEGER NOT NULL,
    attempts   INTEGER NOT NULL,
    claim      TEXT,
    last_error TEXT,
    range_end  INTEGER,
    PRIMARY KEY (agent, tenant, owner, task_id, config_id, seq)
) WITHOUT ROWID;
INSERT INTO a2a_push_outbox_v7 (agent, tenant, owner, task_id, config_id, seq, created_ms, next_ms, attempts, claim, last_error, range_end)
SELECT CASE WHEN instr(tenant, char(31)) > 0 THEN substr(tenant, 1, instr(tenant, char(31)) - 1) ELSE '' END,
       substr(tenant, instr(tenant, char(31)) + 1),
       owner, task_id, config_id, seq, created_ms, next_ms, attempts, claim, last_error, range_end
FROM a2a_push_outbox;
DROP TABLE a2a_push_outbox;
ALTER TABLE a2a_push_outbox_v7 RENAME TO a2a_push_outbox;

CREATE TABLE a2a_upstream_links_v7 (
    agent               TEXT NOT NULL DEFAULT '',
    tenant              TEXT NOT NULL,
    owner               TEXT NOT NULL,
    task_id             TEXT NOT NULL,
    upstream_task_id    TEXT NOT NULL,
    upstream_context_id TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    PRIMARY KEY (agent, tenant, owner, task_id)
) WITHOUT ROWID;
INSERT INTO a2a_upstream_links_v7 (agent, tenant, owner, task_id, upstream_task_id, upstream_context_id, session_id)
SELECT CASE WHEN instr(tenant, char(31)) > 0 THEN substr(tenant, 1, instr(tenant, char(31)) - 1) ELSE '' END,
       substr(tenant, instr(tenant, char(31)) + 1),
       owner, task_id, upstream_task_id, upstream_context_id, session_id
FROM a2a_upstream_links;
DROP TABLE a2a_upstream_links;
ALTER TABLE a2a_upstream_links_v7 RENAME TO a2a_upstream_links;

-- The indexes of the replaced tables (dropped with them).
CREATE INDEX a2a_tasks_by_status_time ON a2a_tasks (agent, tenant, owner, status_ms DESC, id);
CREATE INDEX a2a_tasks_by_state ON a2a_tasks (state, status_ms);
CREATE INDEX a2a_push_outbox_due ON a2a_push_outbox (next_ms);

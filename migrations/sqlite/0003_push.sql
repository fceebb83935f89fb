-- Push notifications (src/push): webhook configs kept beside their tasks, the outbox of
-- deliveries written in the same transaction as the events, and the signing key.

CREATE TABLE a2a_push_configs (
    tenant           TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    task_id          TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    url              TEXT    NOT NULL,
    token            TEXT,
    auth_scheme      TEXT,
    auth_credentials TEXT,
    -- 1 while deliveries are made; 0 once disabled (410 Gone, or too many failures)
    enabled          INTEGER NOT NULL,
    -- deliveries given up in a row
    failures         INTEGER NOT NULL,
    last_error       TEXT,
    created_ms       INTEGER NOT NULL,
    PRIMARY KEY (tenant, owner, task_id, id)
) WITHOUT ROWID;

-- One row per (event, config) still to deliver. next_ms: when it is due, or, while
-- claimed, when the claim's lease ends (claim names the claim).
CREATE TABLE a2a_push_outbox (
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
    PRIMARY KEY (tenant, owner, task_id, config_id, seq)
) WITHOUT ROWID;
CREATE INDEX a2a_push_outbox_due ON a2a_push_outbox (next_ms);

-- The generated Ed25519 signing key (PKCS#8, base64), when none is configured.
CREATE TABLE a2a_push_keys (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    pkcs8      TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);

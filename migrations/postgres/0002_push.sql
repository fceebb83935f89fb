-- Push notifications (src/push): webhook configs kept beside their tasks, the outbox of
-- deliveries written in the same transaction as the events, and the signing key.

CREATE TABLE a2a_push_configs (
    tenant           TEXT COLLATE "C" NOT NULL,
    owner            TEXT COLLATE "C" NOT NULL,
    task_id          TEXT COLLATE "C" NOT NULL,
    id               TEXT COLLATE "C" NOT NULL,
    url              TEXT NOT NULL,
    token            TEXT,
    auth_scheme      TEXT,
    auth_credentials TEXT,
    -- 1 while deliveries are made; 0 once disabled (410 Gone, or too many failures)
    enabled          BIGINT  NOT NULL,
    -- deliveries given up in a row
    failures         BIGINT  NOT NULL,
    last_error       TEXT,
    created_ms       BIGINT  NOT NULL,
    PRIMARY KEY (tenant, owner, task_id, id)
);

-- One row per (event, config) still to deliver. next_ms: when it is due, or, while
-- claimed, when the claim's lease ends (claim names the claim).
CREATE TABLE a2a_push_outbox (
    tenant     TEXT COLLATE "C" NOT NULL,
    owner      TEXT COLLATE "C" NOT NULL,
    task_id    TEXT COLLATE "C" NOT NULL,
    config_id  TEXT COLLATE "C" NOT NULL,
    seq        BIGINT  NOT NULL,
    created_ms BIGINT  NOT NULL,
    next_ms    BIGINT  NOT NULL,
    attempts   BIGINT  NOT NULL,
    claim      TEXT,
    last_error TEXT,
    PRIMARY KEY (tenant, owner, task_id, config_id, seq)
);
CREATE INDEX a2a_push_outbox_due ON a2a_push_outbox (next_ms);

-- The generated Ed25519 signing key (PKCS#8, base64), when none is configured.
CREATE TABLE a2a_push_keys (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    pkcs8      TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);

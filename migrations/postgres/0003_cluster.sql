-- Several gateway instances on one database (src/cluster): who is alive, and which
-- instance is processing which task. See src/store/postgres_cluster.rs.

-- One row per running gateway process, its heartbeat written every few seconds
-- (timestamps are the database's clock, so instances need not agree on theirs).
CREATE TABLE a2a_instances (
    id           TEXT COLLATE "C" PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The lease of a task: held by the instance whose driver is processing a command of
-- it (a turn, a cancel, a close), released when the driver goes idle. A lease whose
-- instance stopped heart-beating is taken over by another instance, which ends the
-- task FAILED naming the lost instance.
CREATE TABLE a2a_task_leases (
    tenant     TEXT COLLATE "C" NOT NULL,
    owner      TEXT COLLATE "C" NOT NULL,
    task_id    TEXT COLLATE "C" NOT NULL,
    instance   TEXT COLLATE "C" NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, owner, task_id)
);
CREATE INDEX a2a_task_leases_by_instance ON a2a_task_leases (instance);

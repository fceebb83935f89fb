-- At most one invocation per runtime session across all gateway instances (src/cluster,
-- "Session leases"). See src/store/postgres_cluster.rs.

-- The lease of a runtime session: held by the instance whose executor is invoking that
-- session now, deleted when the invocation is over. A holder whose heartbeat row
-- (a2a_instances) is missing or older than the lease time is dead: the next claim takes
-- the row over. The session id is the executor's (for AgentCore `a2a-` and a SHA-256 of
-- tenant, owner and contextId), never a caller's secret.
-- `token` is random per claim: a release deletes only its own claim, never a later
-- claim of the same session by the same instance.
CREATE TABLE a2a_session_leases (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    instance   TEXT COLLATE "C" NOT NULL,
    token      BIGINT NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX a2a_session_leases_by_instance ON a2a_session_leases (instance);

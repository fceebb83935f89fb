-- Which task of an upstream A2A agent (`[upstream] kind = "a2a"`) each gateway task is:
-- the agent's task and context ids and the runtime session its calls use. Gateway ids
-- are never the agent's. A row is deleted with its task (the retention purge).
CREATE TABLE a2a_upstream_links (
    tenant              TEXT NOT NULL,
    owner               TEXT NOT NULL,
    task_id             TEXT NOT NULL,
    upstream_task_id    TEXT NOT NULL,
    upstream_context_id TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    PRIMARY KEY (tenant, owner, task_id)
) WITHOUT ROWID;

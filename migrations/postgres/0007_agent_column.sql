-- The agent of the gateway a row belongs to (`[agents.<id>]`, docs/agents.md) gets a
-- column of its own in every table keyed by a caller's scope, first in its primary key:
-- `''` is the agent at `/`. Releases before this migration kept a named agent's rows
-- under the tenant "<agent>" || chr(31) || "<tenant>" (U+001F, which neither an agent
-- id nor a tenant can hold); those rows are split into their agent and tenant here, so
-- every task, event, push config, queued delivery, upstream link and lease stays
-- reachable through its agent. Every other row belongs to the agent at `/`.
-- Each table: add the column, drop the old key (so that a split row never meets the
-- old key of another row), split, add the new key.

ALTER TABLE a2a_tasks ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_tasks DROP CONSTRAINT a2a_tasks_pkey;
UPDATE a2a_tasks SET agent = split_part(tenant, chr(31), 1),
                     tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_tasks ADD PRIMARY KEY (agent, tenant, owner, id);
DROP INDEX a2a_tasks_by_status_time;
CREATE INDEX a2a_tasks_by_status_time ON a2a_tasks (agent, tenant, owner, status_ms DESC, id);

ALTER TABLE a2a_task_artifacts ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_task_artifacts DROP CONSTRAINT a2a_task_artifacts_pkey;
UPDATE a2a_task_artifacts SET agent = split_part(tenant, chr(31), 1),
                              tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_task_artifacts ADD PRIMARY KEY (agent, tenant, owner, task_id);

ALTER TABLE a2a_task_events ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_task_events DROP CONSTRAINT a2a_task_events_pkey;
UPDATE a2a_task_events SET agent = split_part(tenant, chr(31), 1),
                           tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_task_events ADD PRIMARY KEY (agent, tenant, owner, task_id, seq);

ALTER TABLE a2a_push_configs ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_push_configs DROP CONSTRAINT a2a_push_configs_pkey;
UPDATE a2a_push_configs SET agent = split_part(tenant, chr(31), 1),
                            tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_push_configs ADD PRIMARY KEY (agent, tenant, owner, task_id, id);

ALTER TABLE a2a_push_outbox ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_push_outbox DROP CONSTRAINT a2a_push_outbox_pkey;
UPDATE a2a_push_outbox SET agent = split_part(tenant, chr(31), 1),
                           tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_push_outbox ADD PRIMARY KEY (agent, tenant, owner, task_id, config_id, seq);

ALTER TABLE a2a_upstream_links ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_upstream_links DROP CONSTRAINT a2a_upstream_links_pkey;
UPDATE a2a_upstream_links SET agent = split_part(tenant, chr(31), 1),
                              tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_upstream_links ADD PRIMARY KEY (agent, tenant, owner, task_id);

ALTER TABLE a2a_task_leases ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_task_leases DROP CONSTRAINT a2a_task_leases_pkey;
UPDATE a2a_task_leases SET agent = split_part(tenant, chr(31), 1),
                           tenant = substr(tenant, strpos(tenant, chr(31)) + 1)
WHERE strpos(tenant, chr(31)) > 0;
ALTER TABLE a2a_task_leases ADD PRIMARY KEY (agent, tenant, owner, task_id);

-- A runtime session's lease is per agent: the same session id of two agents (the same
-- caller and contextId) names sessions of two different upstreams, which must not
-- queue behind each other. Existing leases are the agent at `/`'s (a lease of another
-- agent taken before the upgrade is then re-taken under its agent: at worst one
-- invocation overlaps one in flight on an instance still running the old release).
ALTER TABLE a2a_session_leases ADD COLUMN agent TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE a2a_session_leases DROP CONSTRAINT a2a_session_leases_pkey;
ALTER TABLE a2a_session_leases ADD PRIMARY KEY (agent, session_id);

-- Facts about the database itself, one row per key. The first is
-- `owner_namespaces`: the decision the first start after this migration took about
-- the owners of existing rows (docs/authentication.md#owner-namespaces), recorded so
-- that it is taken once per database and never again: the owners of JWT callers are
-- `jwt:<issuer>#<claim>` since this release, and rows a JWT caller wrote before it
-- are rewritten into that form at that start (in the gateway, which knows the
-- configured API-key callers and issuer), under this table's marker.
CREATE TABLE a2a_meta (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

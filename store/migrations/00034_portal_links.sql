-- +goose Up

-- Portal links: a read-only view of one label's tasks and attempts, handed
-- by a tenant to its own customer. The token is hwpl_<id>_<secret>; only
-- the secret's SHA-256 is stored, as an API key's is. A link is read on
-- every portal call (no cache), so a revocation holds on every node as it
-- commits. label_key and label_value are a label filter's one condition.
CREATE TABLE portal_links (
    id          uuid        PRIMARY KEY, -- UUIDv7: id order is creation order
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    secret_hash bytea       NOT NULL,
    label_key   text        NOT NULL,
    label_value text        NOT NULL,
    name        text        NOT NULL DEFAULT '',
    description text        NOT NULL DEFAULT '',
    created_by  text        NOT NULL, -- the audit log's actor
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);

-- A tenant's links newest first (lists, the live-link quota, the clean-up
-- of links long expired or revoked).
CREATE INDEX portal_links_tenant ON portal_links (tenant_id, id DESC);

-- +goose Down
DROP TABLE portal_links;

-- +goose Up

-- Invitations to sign up (HOOKWHEEL_SIGNUP=invite): each code signs up one
-- tenant, once. The code itself is never stored, only its SHA-256, as an
-- API key's secret is; prefix is its first characters, shown in lists so
-- that an operator can tell codes apart without holding them.
--
-- A code is redeemed by one UPDATE that sets used_at only while it is NULL
-- and the code has not expired, so two sign-ups racing for one code cannot
-- both have it; used_by is set once the tenant exists. used_by has no
-- foreign key: the record of who signed up with a code outlives the
-- tenant, as usage rows do, and deleting a tenant never waits on invites.
-- A used row with used_by NULL is a sign-up that stopped between the two.
CREATE TABLE invites (
    id         uuid        PRIMARY KEY, -- UUIDv7: id order is creation order
    code_hash  bytea       NOT NULL UNIQUE,
    prefix     text        NOT NULL,
    note       text        NOT NULL DEFAULT '',
    created_by text        NOT NULL, -- the audit log's actor: "operator" or "cli"
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    used_by    uuid,
    CHECK (expires_at > created_at),
    CHECK (used_by IS NULL OR used_at IS NOT NULL)
);

-- +goose Down
DROP TABLE invites;

-- +goose Up

-- API keys: several per tenant, each with a name, scopes and an expiry, and
-- when it was last used. Existing keys keep full access ('*').
ALTER TABLE api_keys
    ADD COLUMN name         text NOT NULL DEFAULT '',
    ADD COLUMN scopes       text[] NOT NULL DEFAULT '{*}',
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz,
    ADD COLUMN created_by   text NOT NULL DEFAULT 'operator';

-- A tenant's signing secrets, newest (current) first: [{"id", "value",
-- "created_at", "expires_at"}]. Older ones stay while their grace period
-- lasts, so receivers can switch to a new secret without missing a webhook.
-- They live on the tenant row, not in a table of their own, because every
-- claim reads them: one join, as for the single secret before. "value" is
-- "whsec_..." or, under HOOKWHEEL_ENCRYPTION_KEY, sealed ("hwenc1:...").
ALTER TABLE tenants ADD COLUMN signing_secrets jsonb NOT NULL DEFAULT '[]';
UPDATE tenants SET signing_secrets = jsonb_build_array(jsonb_build_object(
    'id', 'ss_' || substr(md5(id::text || signing_secret), 1, 16),
    'value', signing_secret,
    'created_at', created_at));
ALTER TABLE tenants DROP COLUMN signing_secret;

-- Who changed what, when: tenants, keys, secrets, limits. No reference to
-- tenants, so the record outlives what it describes.
CREATE TABLE audit_log (
    id        uuid PRIMARY KEY, -- UUIDv7: id order is time order
    tenant_id uuid,             -- NULL for events of the installation itself
    actor     text NOT NULL,    -- "operator", "cli" or "key:<key id>"
    action    text NOT NULL,    -- e.g. "key.created"
    detail    jsonb NOT NULL DEFAULT '{}',
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id DESC);

-- +goose Down
DROP TABLE audit_log;
ALTER TABLE tenants ADD COLUMN signing_secret text;
UPDATE tenants SET signing_secret = signing_secrets->0->>'value';
ALTER TABLE tenants ALTER COLUMN signing_secret SET NOT NULL;
ALTER TABLE tenants DROP COLUMN signing_secrets;
ALTER TABLE api_keys DROP COLUMN name, DROP COLUMN scopes, DROP COLUMN expires_at, DROP COLUMN last_used_at,
    DROP COLUMN created_by;

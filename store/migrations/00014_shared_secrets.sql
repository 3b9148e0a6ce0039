-- +goose Up

-- Secrets every node of an installation must share and that nobody has to
-- configure: the first node to start makes one and the others read it. Today
-- only the key that signs the dashboard's sessions. A value is sealed with
-- HOOKWHEEL_ENCRYPTION_KEY when that is set, like tenants' signing secrets.
CREATE TABLE shared_secrets (
    name       text PRIMARY KEY,
    value      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE shared_secrets;

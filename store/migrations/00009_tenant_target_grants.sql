-- +goose Up
-- Private ranges one tenant's webhooks may reach, granted by the operator
-- (HOOKWHEEL_TARGET_ALLOW_CIDRS grants a range to every tenant).
ALTER TABLE tenants ADD COLUMN target_allow_cidrs cidr[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE tenants DROP COLUMN target_allow_cidrs;

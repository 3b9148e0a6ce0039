-- +goose Up

-- A tenant's life: 'active'; 'suspended' by the operator (its calls are
-- refused, its due tasks wait, its schedules keep materialising); or
-- 'deleting', from the operator's DELETE until the deleter
-- (tenants.Deleter) has removed its last row, the tenant's own last.
-- deletion_requested_at says when the deletion was asked for, and
-- deleted_rows how many rows of each table it has removed so far
-- ({"tasks": 12000, "attempts": 30500, ...}): the progress the admin API
-- shows. deleter is the deleter (tenants.Deleter) working on it, until
-- deleter_until: one at a time, and when it stops renewing (its node died)
-- another takes over where it left off. Constant defaults change only the
-- catalogue.
SET LOCAL lock_timeout = '5s';
ALTER TABLE tenants
    ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'deleting')),
    ADD COLUMN deletion_requested_at timestamptz,
    ADD COLUMN deleted_rows jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN deleter uuid,
    ADD COLUMN deleter_until timestamptz;

-- The tenants whose tasks the dispatchers hold and the deleter works on:
-- every node reads them every few seconds, and there are few.
CREATE INDEX tenants_not_active ON tenants (status) WHERE status <> 'active';

-- audit_log has no reference to tenants (00011), so the entries of a deleted
-- tenant, its deletion's among them, outlive its row.

-- +goose Down
DROP INDEX IF EXISTS tenants_not_active;
ALTER TABLE tenants DROP COLUMN IF EXISTS deleter_until, DROP COLUMN IF EXISTS deleter, DROP COLUMN IF EXISTS deleted_rows, DROP COLUMN IF EXISTS deletion_requested_at,
    DROP COLUMN IF EXISTS status;

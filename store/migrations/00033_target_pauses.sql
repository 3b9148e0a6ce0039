-- +goose Up

-- A tenant's paused targets (POST /v1/targets/pause, or hookwheel's own
-- pause of a target that failed every attempt for
-- HOOKWHEEL_TARGET_DISABLE_AFTER). A target is a URL's scheme, host
-- (lowercased) and port, as hookwheel_target_key gives it. The tenant's
-- tasks to a paused target are left out of claims and of the sweep
-- (store.ClaimTasks, ListDueExcept) by the dispatchers, which read this
-- table whole when a tenant change is announced and every few seconds: few
-- targets are ever paused. The tasks themselves are not touched, so a pause
-- and a resume cost one row whatever the backlog.
CREATE TABLE target_pauses (
    tenant_id  uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    target     text        NOT NULL,
    paused_at  timestamptz NOT NULL,
    paused_by  text        NOT NULL CHECK (paused_by IN ('tenant', 'hookwheel')),
    reason     text        NOT NULL DEFAULT '',
    -- hookwheel's pauses: the first failure of the unbroken run of failures
    -- that paused the target, and the last one's error.
    since      timestamptz,
    last_error text,
    PRIMARY KEY (tenant_id, target)
);

-- The target of a task's URL, as the dispatcher's targetKey gives it:
-- 'https://example.com:443'. The scheme and host are lowercased, the
-- brackets of an IPv6 host dropped, a missing port is the scheme's default.
-- It is computed only for the tasks of tenants with a paused target, when
-- they are claimed or swept; no index holds it.
-- +goose StatementBegin
CREATE FUNCTION hookwheel_target_key(url text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT lower(m[1]) || '://' || lower(coalesce(m[2], m[3])) || ':'
        || coalesce(nullif(m[4], ''), CASE lower(m[1]) WHEN 'https' THEN '443' WHEN 'http' THEN '80' ELSE '' END)
    FROM regexp_match(url, '^([A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/?#]*@)?(?:\[([^\]]*)\]|([^:/?#]*))(?::([0-9]*))?') AS m
$$;
-- +goose StatementEnd


-- Each tenant's targets that failed lately, for hookwheel's own pauses. A
-- row is written only for a target with failures: every dispatcher sums up
-- its attempts per tenant and target in memory and, every few seconds,
-- writes the runs of failures it saw, and the successes of the targets
-- known failing here; a healthy target costs no write. failing_since is
-- the first failure after reset_at (the last success any node saw, or the
-- last resume) and last_failure_at the last: once they are
-- HOOKWHEEL_TARGET_DISABLE_AFTER apart the target is paused by hookwheel.
-- recovering is set by a resume of hookwheel's pause, cleared by the next
-- success, which tells the tenant (target.recovered).
CREATE TABLE target_health (
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    target          text        NOT NULL,
    failing_since   timestamptz,
    last_failure_at timestamptz,
    last_error      text,
    reset_at        timestamptz,
    recovering      boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, target),
    CHECK ((failing_since IS NULL) = (last_failure_at IS NULL))
);

-- Where the tenant's operations events go (target.paused,
-- target.recovered): a signed POST, sent as one of its tasks.
ALTER TABLE tenants ADD COLUMN operations_url text;

-- +goose Down
ALTER TABLE tenants DROP COLUMN operations_url;
DROP TABLE target_health;
DROP FUNCTION hookwheel_target_key(text);
DROP TABLE target_pauses;

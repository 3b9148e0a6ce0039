package tenants_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := tenants.New(tenants.Config{Store: storetest.DB(t)})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	other, err := svc.Create(ctx, "other", model.ActorCLI)
	require.NoError(t, err)

	got, err := svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	require.Equal(t, acme.Tenant.ID, got.Tenant.ID)
	require.Equal(t, "acme", got.Tenant.Name)
	require.Equal(t, []model.Scope{model.ScopeAll}, got.Key.Scopes, "a tenant's first key holds every scope")

	keyID, ok := tenants.KeyID(acme.APIKey)
	require.True(t, ok)
	otherKeyID, _ := tenants.KeyID(other.APIKey)
	otherSecret := strings.TrimPrefix(other.APIKey, "hw_"+otherKeyID+"_")

	for name, key := range map[string]string{
		"empty":                    "",
		"no prefix":                strings.TrimPrefix(acme.APIKey, "hw_"),
		"no secret":                "hw_" + keyID + "_",
		"unknown key id":           "hw_aaaaaaaaaaaaa_" + otherSecret,
		"another key's secret":     "hw_" + keyID + "_" + otherSecret,
		"one character off":        acme.APIKey[:len(acme.APIKey)-1] + otherThan(acme.APIKey[len(acme.APIKey)-1:]),
		"trailing garbage":         acme.APIKey + "x",
		"key id of another tenant": "hw_" + otherKeyID + "_" + strings.TrimPrefix(acme.APIKey, "hw_"+keyID+"_"),
		"invalid UTF-8 key id":     "hw_\xff\xfe_abc",
		"upper-case key id":        "hw_" + strings.ToUpper(keyID) + "_" + otherSecret,
		"NUL in the secret":        "hw_" + keyID + "_abc\x00def",
	} {
		_, err := svc.Authenticate(ctx, key)
		require.ErrorIs(t, err, tenants.ErrUnauthenticated, name)
	}

	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, keyID, nil, model.ActorCLI)
	require.NoError(t, err)
	_, err = svc.Authenticate(ctx, acme.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated, "a revoked key")
	_, err = svc.Authenticate(ctx, other.APIKey)
	require.NoError(t, err, "revoking one tenant's key leaves the other's")
}

// otherThan is a one-character string that is not c: a key whose last
// character happened to be the replacement would otherwise stay valid (this
// test failed once in that way).
func otherThan(c string) string {
	if c == "x" {
		return "y"
	}
	return "x"
}

// countingStore counts the key lookups that reach the real store.
type countingStore struct {
	*store.DB
	lookups atomic.Int64
}

func (c *countingStore) GetAPIKey(ctx context.Context, id string) (*model.APIKey, *model.Tenant, error) {
	c.lookups.Add(1)
	return c.DB.GetAPIKey(ctx, id)
}

// TestAuthenticateRemembersUnknownKeys: a key id that names no key is
// looked up once, then refused from memory until its TTL passes; a wrong
// secret for a real key id is never remembered, so the key's owner is
// never locked out.
func TestAuthenticateRemembersUnknownKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &countingStore{DB: storetest.DB(t)}
	clk := clock.NewFake(time.Now())
	// Without the key cache, so that every lookup that is not refused from
	// the unknown-key memory reaches the store.
	svc := tenants.New(tenants.Config{Store: db, Clock: clk, UnknownKeyTTL: 10 * time.Second, KeyCacheTTL: -1})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	keyID, _ := tenants.KeyID(acme.APIKey)

	unknown := "hw_aaaaaaaaaaaaa_" + strings.Repeat("b", 32)
	for range 5 {
		_, err := svc.Authenticate(ctx, unknown)
		require.ErrorIs(t, err, tenants.ErrUnauthenticated)
	}
	require.EqualValues(t, 1, db.lookups.Load(), "an unknown key id is looked up once")
	clk.Advance(10 * time.Second)
	_, err = svc.Authenticate(ctx, unknown)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated)
	require.EqualValues(t, 2, db.lookups.Load(), "and again once its TTL has passed")

	wrong := "hw_" + keyID + "_" + strings.Repeat("c", 32)
	for range 3 {
		_, err := svc.Authenticate(ctx, wrong)
		require.ErrorIs(t, err, tenants.ErrUnauthenticated)
	}
	got, err := svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err, "wrong secrets tried against a key never lock its owner out")
	require.Equal(t, acme.Tenant.ID, got.Tenant.ID)
	require.EqualValues(t, 6, db.lookups.Load(), "a real key id is always looked up")
}

package tenants_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

func TestCreateKeyRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	svc := tenants.New(tenants.Config{Store: storetest.DB(t), Clock: clk})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	past, longName := clk.Now().Add(-time.Second), string(make([]rune, tenants.MaxKeyNameLength+1))
	grantor, err := svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Scopes: []model.Scope{model.ScopeKeysManage, model.ScopeTasksRead}},
		nil, model.ActorOperator)
	require.NoError(t, err)
	reader := &grantor.Key

	for _, tc := range []struct {
		name    string
		spec    tenants.KeySpec
		grantor *model.APIKey
		field   string
		refused error
	}{
		{name: "unknown scope", spec: tenants.KeySpec{Scopes: []model.Scope{"tasks:delete"}}, field: "scopes[0]"},
		{name: "expiry in the past", spec: tenants.KeySpec{ExpiresAt: &past}, field: "expires_at"},
		{name: "name too long", spec: tenants.KeySpec{Name: longName}, field: "name"},
		{name: "scope the grantor lacks", spec: tenants.KeySpec{Scopes: []model.Scope{model.ScopeTasksWrite}}, grantor: reader, refused: tenants.ErrScopeNotHeld},
		{name: "every scope from a narrower grantor", spec: tenants.KeySpec{}, grantor: reader, refused: tenants.ErrScopeNotHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.CreateKey(ctx, acme.Tenant.ID, tc.spec, tc.grantor, model.ActorCLI)
			if tc.refused != nil {
				require.ErrorIs(t, err, tc.refused)
				return
			}
			var fieldErr *tenants.FieldError
			require.ErrorAs(t, err, &fieldErr)
			require.Equal(t, tc.field, fieldErr.Field)
		})
	}

	// Within the grantor's scopes, and from the operator anything goes;
	// scopes come back sorted and without repeats.
	k, err := svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Scopes: []model.Scope{"tasks:read", "keys:manage", "tasks:read"}}, reader, model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, []model.Scope{model.ScopeKeysManage, model.ScopeTasksRead}, k.Key.Scopes)
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{}, nil, model.ActorOperator)
	require.NoError(t, err)
}

// TestKeyCacheAcrossNodes: two services over one database stand for two
// nodes. A key revoked through one is refused by it at once and by the
// other once its cache time has passed; expiry needs no cache time at all.
func TestKeyCacheAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &countingStore{DB: storetest.DB(t)}
	clk := clock.NewFake(time.Now())
	a := tenants.New(tenants.Config{Store: db, Clock: clk, KeyCacheTTL: 2 * time.Second})
	b := tenants.New(tenants.Config{Store: db, Clock: clk, KeyCacheTTL: 2 * time.Second})
	acme, err := a.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)

	for range 10 {
		_, err := b.Authenticate(ctx, acme.APIKey)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, db.lookups.Load(), "a valid key is read once per cache time")

	keyID, _ := tenants.KeyID(acme.APIKey)
	_, err = a.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	_, err = a.RevokeKey(ctx, acme.Tenant.ID, keyID, nil, model.ActorOperator)
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, acme.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated, "refused at once where it was revoked")
	_, err = b.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err, "still cached on the other node")
	clk.Advance(2 * time.Second)
	_, err = b.Authenticate(ctx, acme.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated, "refused everywhere after the cache time")

	expiresAt := clk.Now().Add(time.Hour)
	k, err := a.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{ExpiresAt: &expiresAt}, nil, model.ActorOperator)
	require.NoError(t, err)
	_, err = b.Authenticate(ctx, k.APIKey)
	require.NoError(t, err)
	clk.Advance(time.Hour)
	_, err = b.Authenticate(ctx, k.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated, "an expired key is refused even from the cache")
}

// touchCounter counts the statements that record key use.
type touchCounter struct {
	*store.DB
	touches atomic.Int64
}

func (c *touchCounter) TouchAPIKeys(ctx context.Context, lastUsed map[string]time.Time) error {
	c.touches.Add(1)
	return c.DB.TouchAPIKeys(ctx, lastUsed)
}

func TestLastUsedRecordedInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &touchCounter{DB: storetest.DB(t)}
	usage := tenants.NewUsageRecorder(tenants.UsageConfig{Store: db})
	svc := tenants.New(tenants.Config{Store: db, Usage: usage})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	second, err := svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Name: "second"}, nil, model.ActorCLI)
	require.NoError(t, err)

	for range 100 {
		_, err := svc.Authenticate(ctx, acme.APIKey)
		require.NoError(t, err)
	}
	_, err = svc.Authenticate(ctx, second.APIKey)
	require.NoError(t, err)
	usage.Flush(ctx)
	require.EqualValues(t, 1, db.touches.Load(), "101 calls of two keys, one statement")

	keys, err := svc.ListKeys(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	for _, k := range keys {
		require.NotNil(t, k.LastUsedAt, "key %s", k.Name)
		require.WithinDuration(t, time.Now(), *k.LastUsedAt, time.Minute)
	}
	usage.Flush(ctx)
	require.EqualValues(t, 1, db.touches.Load(), "nothing new, nothing written")
}

func TestRotateSigningSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Now().UTC().Truncate(time.Millisecond))
	svc := tenants.New(tenants.Config{Store: storetest.DB(t), Clock: clk})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	first := acme.Tenant.SigningSecrets[0].ID

	ids := func() []string {
		t.Helper()
		active, err := svc.SigningSecrets(ctx, acme.Tenant.ID)
		require.NoError(t, err)
		out := make([]string, len(active))
		for i, s := range active {
			require.Empty(t, s.Value, "listings never carry a value")
			out[i] = s.ID
		}
		return out
	}

	second, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, time.Hour, "", model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, []string{second.ID, first}, ids())
	require.Equal(t, clk.Now().Add(time.Hour), second.GraceEndsAt)

	// A second rotation within the grace keeps the first one's earlier end.
	clk.Advance(30 * time.Minute)
	third, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, 24*time.Hour, "", model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, []string{third.ID, second.ID, first}, ids())
	clk.Advance(30 * time.Minute)
	require.Equal(t, []string{third.ID, second.ID}, ids(), "the first secret's grace has ended")

	// Many rotations keep at most five secrets signing.
	var latest []string
	for range 6 {
		r, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, time.Hour, "", model.ActorCLI)
		require.NoError(t, err)
		latest = append([]string{r.ID}, latest...)
	}
	require.Equal(t, latest[:5], ids())

	// A grace of zero ends the others at once.
	last, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, 0, "", model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, []string{last.ID}, ids())

	for _, grace := range []time.Duration{-time.Second, tenants.MaxGrace + time.Second} {
		_, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, grace, "", model.ActorCLI)
		var fieldErr *tenants.FieldError
		require.ErrorAs(t, err, &fieldErr, "grace %s", grace)
	}

	entries, err := svc.ListAudit(ctx, model.AuditFilter{TenantID: &acme.Tenant.ID, Limit: 100})
	require.NoError(t, err)
	rotations := 0
	for _, e := range entries {
		if e.Action == "signing_secret.rotated" {
			rotations++
			require.NotContains(t, e.Detail, "value")
		}
	}
	require.Equal(t, 9, rotations)
}

func encryptionKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func TestRekey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.DB(t)
	k1, err := keyring.Parse("k1:" + encryptionKey(t))
	require.NoError(t, err)

	_, err = tenants.New(tenants.Config{Store: db}).Rekey(ctx, model.ActorCLI)
	require.ErrorContains(t, err, "HOOKWHEEL_ENCRYPTION_KEY", "no key, no rekey")

	plain, err := tenants.New(tenants.Config{Store: db}).Create(ctx, "plain", model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, plain.SigningSecret, plain.Tenant.SigningSecrets[0].Value, "without a key, stored as is")

	svc := tenants.New(tenants.Config{Store: db, Keyring: k1})
	sealed, err := svc.Create(ctx, "sealed", model.ActorCLI)
	require.NoError(t, err)
	require.True(t, keyring.IsSealed(sealed.Tenant.SigningSecrets[0].Value))
	open := func(id *tenants.Created, k *keyring.Keyring) string {
		t.Helper()
		tn, err := svc.Get(ctx, id.Tenant.ID)
		require.NoError(t, err)
		s := tn.SigningSecrets[0]
		v, err := k.Open(s.Value, s.SealContext(tn.ID))
		require.NoError(t, err)
		return v
	}
	require.Equal(t, sealed.SigningSecret, open(sealed, k1))

	res, err := svc.Rekey(ctx, model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, tenants.RekeyResult{Tenants: 1, Scanned: 2, Secrets: 1}, res, "only the plaintext one")
	require.Equal(t, plain.SigningSecret, open(plain, k1))

	// A value moved onto another tenant's row does not open there.
	other, err := svc.Get(ctx, plain.Tenant.ID)
	require.NoError(t, err)
	mine, err := svc.Get(ctx, sealed.Tenant.ID)
	require.NoError(t, err)
	_, err = k1.Open(mine.SigningSecrets[0].Value, model.SigningSecret{ID: mine.SigningSecrets[0].ID}.SealContext(other.ID))
	require.ErrorIs(t, err, keyring.ErrNoKey)
}

// TestSharedSecretsFollowTheKeyring: the installation's own secrets are
// made once, sealed under the keyring's first key, re-sealed by Rekey when
// the key rotates, and still open once the old key is gone.
func TestSharedSecretsFollowTheKeyring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.DB(t)
	k1Text, k2Text := "k1:"+encryptionKey(t), "k2:"+encryptionKey(t)
	ring := func(spec string) *keyring.Keyring {
		k, err := keyring.Parse(spec)
		require.NoError(t, err)
		return k
	}
	stored := func() string {
		all, err := db.ListSharedSecrets(ctx)
		require.NoError(t, err)
		return all["test"]
	}
	makes := 0
	makeValue := func() (string, error) { makes++; return fmt.Sprint("value-", makes), nil }

	first, err := tenants.New(tenants.Config{Store: db, Keyring: ring(k1Text)}).SharedSecret(ctx, "test", makeValue)
	require.NoError(t, err)
	require.Equal(t, "value-1", first)
	require.True(t, strings.HasPrefix(stored(), "hwenc1:k1:"), "sealed under k1: %.12s", stored())
	again, err := tenants.New(tenants.Config{Store: db, Keyring: ring(k1Text)}).SharedSecret(ctx, "test", makeValue)
	require.NoError(t, err)
	require.Equal(t, first, again, "made once")

	res, err := tenants.New(tenants.Config{Store: db, Keyring: ring(k2Text + "," + k1Text)}).Rekey(ctx, model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, 1, res.Shared)
	require.True(t, strings.HasPrefix(stored(), "hwenc1:k2:"), "re-sealed under k2: %.12s", stored())

	after, err := tenants.New(tenants.Config{Store: db, Keyring: ring(k2Text)}).SharedSecret(ctx, "test", makeValue)
	require.NoError(t, err, "k1 retired")
	require.Equal(t, first, after)
}

// BenchmarkAuthenticate is the cost of authenticating one call: "uncached"
// reads the key and its tenant from Postgres every time (as every call did
// before the key cache), "cached" within the key cache's TTL.
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	db := storetest.DB(b)
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"uncached", -1}, {"cached", time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			usage := tenants.NewUsageRecorder(tenants.UsageConfig{Store: db}) // gathers, never flushed here
			svc := tenants.New(tenants.Config{Store: db, KeyCacheTTL: bc.ttl, Usage: usage})
			acme, err := svc.Create(ctx, "bench", model.ActorCLI)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := svc.Authenticate(ctx, acme.APIKey); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// hookStore runs during once, in the middle of the next key lookup.
type hookStore struct {
	*store.DB
	lookups atomic.Int64
	during  func()
}

func (h *hookStore) GetAPIKey(ctx context.Context, id string) (*model.APIKey, *model.Tenant, error) {
	h.lookups.Add(1)
	k, t, err := h.DB.GetAPIKey(ctx, id)
	if f := h.during; f != nil {
		h.during = nil
		f()
	}
	return k, t, err
}

// TestKeyCacheLookupRaces: a lookup overtaken by a revocation on the same
// node is not cached, and a cached key's age counts from when its lookup
// began, however long the query took.
func TestKeyCacheLookupRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &hookStore{DB: storetest.DB(t)}
	clk := clock.NewFake(time.Now())
	svc := tenants.New(tenants.Config{Store: db, Clock: clk, KeyCacheTTL: 2 * time.Second})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	keyID, _ := tenants.KeyID(acme.APIKey)

	// A slow lookup: 1.5 s of the 2 s pass while it runs.
	db.during = func() { clk.Advance(1500 * time.Millisecond) }
	_, err = svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	clk.Advance(600 * time.Millisecond)
	_, err = svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	require.EqualValues(t, 2, db.lookups.Load(), "2.1 s after the first lookup began, the key is read again")

	// A revocation while a lookup runs: that call was already admitted, the
	// next is refused.
	clk.Advance(2 * time.Second)
	db.during = func() {
		_, err := svc.RevokeKey(ctx, acme.Tenant.ID, keyID, nil, model.ActorOperator)
		require.NoError(t, err)
	}
	_, err = svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	_, err = svc.Authenticate(ctx, acme.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated)
}

// TestKeysBoundedByTheirCreator: a key creates and revokes keys only within
// its own scopes and lifetime, and only while it is itself usable.
func TestKeysBoundedByTheirCreator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := tenants.New(tenants.Config{Store: storetest.DB(t)})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	fullID, _ := tenants.KeyID(acme.APIKey)

	tomorrow := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Microsecond)
	contractor, err := svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{
		Scopes: []model.Scope{model.ScopeKeysManage, model.ScopeTasksRead}, ExpiresAt: &tomorrow,
	}, nil, model.ActorOperator)
	require.NoError(t, err)
	grantor := &contractor.Key

	inherited, err := svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Scopes: []model.Scope{model.ScopeTasksRead}}, grantor, model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, tomorrow, *inherited.Key.ExpiresAt, "no expiry given: the creator's")
	later := tomorrow.Add(time.Hour)
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Scopes: []model.Scope{model.ScopeTasksRead}, ExpiresAt: &later}, grantor, model.ActorCLI)
	var fieldErr *tenants.FieldError
	require.ErrorAs(t, err, &fieldErr)
	require.Equal(t, "expires_at", fieldErr.Field)

	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, fullID, grantor, model.ActorCLI)
	require.ErrorIs(t, err, tenants.ErrScopeNotHeld, "a narrow key cannot revoke a full-access one")
	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, inherited.Key.ID, grantor, model.ActorCLI)
	require.NoError(t, err, "but can revoke one within its scopes")

	// Revoked elsewhere (the caller's copy is stale): it creates nothing.
	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, contractor.Key.ID, nil, model.ActorOperator)
	require.NoError(t, err)
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Scopes: []model.Scope{model.ScopeTasksRead}}, grantor, model.ActorCLI)
	require.ErrorIs(t, err, tenants.ErrUnauthenticated)
	keys, err := svc.ListKeys(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Len(t, keys, 3, "the initial key, the contractor's and the one it made")
}

// TestKeyQuota: a tenant creates at most MaxUsableKeys usable keys itself;
// the operator may mint beyond them, and a revocation makes room.
func TestKeyQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := tenants.New(tenants.Config{Store: storetest.DB(t)})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	keys, err := svc.ListKeys(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	grantor := &keys[0]

	var last *tenants.NewKey
	for range tenants.MaxUsableKeys - 1 {
		last, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{}, grantor, model.ActorCLI)
		require.NoError(t, err)
	}
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{}, grantor, model.ActorCLI)
	require.ErrorIs(t, err, tenants.ErrTooManyKeys)
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{Name: "recovery"}, nil, model.ActorOperator)
	require.NoError(t, err, "the operator is not held to it")

	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{}, grantor, model.ActorCLI)
	require.ErrorIs(t, err, tenants.ErrTooManyKeys, "the operator's key counts as usable too")
	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, last.Key.ID, grantor, model.ActorCLI)
	require.NoError(t, err)
	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, last.Key.ID, grantor, model.ActorCLI)
	require.NoError(t, err)
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{}, grantor, model.ActorCLI)
	require.ErrorIs(t, err, tenants.ErrTooManyKeys, "one revoked key is one place, however often it is revoked")
	var second *tenants.NewKey
	keys, err = svc.ListKeys(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	for i := range keys {
		if keys[i].Usable(time.Now()) && keys[i].ID != grantor.ID && keys[i].Name != "recovery" {
			second = &tenants.NewKey{Key: keys[i]}
			break
		}
	}
	require.NotNil(t, second)
	_, err = svc.RevokeKey(ctx, acme.Tenant.ID, second.Key.ID, grantor, model.ActorCLI)
	require.NoError(t, err)
	_, err = svc.CreateKey(ctx, acme.Tenant.ID, tenants.KeySpec{}, grantor, model.ActorCLI)
	require.NoError(t, err, "revoking makes room")
}

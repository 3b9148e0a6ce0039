package tenants_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestEd25519KeySealedAtRest: an Ed25519 private key is stored sealed under
// the keyring, like an HMAC secret: the row holds neither its stored form
// nor its bytes, only its public key in the clear; it opens to the key pair
// the rotation showed the public key of, and a rekey re-seals it under the
// new key.
func TestEd25519KeySealedAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.DatabaseURL(t)
	db, err := store.Open(ctx, store.Config{DatabaseURL: dbURL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	spec1, spec2 := "k1:"+encryptionKey(t), "k2:"+encryptionKey(t)
	k1, err := keyring.Parse(spec1)
	require.NoError(t, err)
	svc := tenants.New(tenants.Config{Store: db, Keyring: k1})

	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	rotated, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, time.Hour, signing.Ed25519, model.ActorCLI)
	require.NoError(t, err)
	require.Empty(t, rotated.Plaintext, "an Ed25519 key shows no secret")
	require.Equal(t, string(signing.Ed25519), rotated.Algorithm)
	require.True(t, strings.HasPrefix(rotated.PublicKey, signing.PublicKeyPrefix), rotated.PublicKey)

	// What the row holds, as Postgres has it.
	rawRow := func() string {
		t.Helper()
		var raw string
		require.NoError(t, conn.QueryRow(ctx, `SELECT signing_secrets::text FROM tenants WHERE id = $1`, acme.Tenant.ID).Scan(&raw))
		return raw
	}
	tn, err := svc.Get(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	stored := tn.SigningSecrets[0]
	require.Equal(t, rotated.ID, stored.ID)
	require.True(t, keyring.IsSealed(stored.Value))
	private, err := k1.Open(stored.Value, stored.SealContext(tn.ID))
	require.NoError(t, err)
	key, err := signing.ParseKey(private)
	require.NoError(t, err)
	require.Equal(t, rotated.PublicKey, key.PublicKey(), "the key sealed is the pair of the public key shown")

	raw := rawRow()
	require.NotContains(t, raw, signing.PrivateKeyPrefix)
	encoded := strings.TrimPrefix(private, signing.PrivateKeyPrefix)
	// The seed is the first 32 bytes: the first 40 characters encode 30 of them.
	require.NotContains(t, raw, encoded[:40], "the private key is not in the row")
	require.NotContains(t, raw, acme.SigningSecret[len("whsec_"):], "nor the HMAC secret it replaced")
	require.Equal(t, 2, strings.Count(raw, "hwenc1:k1:"))
	require.Contains(t, raw, rotated.PublicKey, "the public key is public")
	require.Contains(t, raw, `"algorithm": "ed25519"`)

	// A rekey under a new key re-seals both; the private key opens under
	// the new key alone, the same key.
	both, err := keyring.Parse(spec2 + "," + spec1)
	require.NoError(t, err)
	res, err := tenants.New(tenants.Config{Store: db, Keyring: both}).Rekey(ctx, model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, 2, res.Secrets)
	raw = rawRow()
	require.Equal(t, 2, strings.Count(raw, "hwenc1:k2:"))
	require.NotContains(t, raw, "hwenc1:k1:")
	require.NotContains(t, raw, encoded[:40])
	k2, err := keyring.Parse(spec2)
	require.NoError(t, err)
	tn, err = svc.Get(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	reopened, err := k2.Open(tn.SigningSecrets[0].Value, tn.SigningSecrets[0].SealContext(tn.ID))
	require.NoError(t, err)
	require.Equal(t, private, reopened)

	// The listing names each algorithm and shows the public key only.
	listed, err := svc.SigningSecrets(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.Equal(t, rotated.ID, listed[0].ID)
	require.Equal(t, "ed25519", listed[0].Algorithm)
	require.Equal(t, rotated.PublicKey, listed[0].PublicKey)
	require.Empty(t, listed[0].Value)
	require.Nil(t, listed[0].ExpiresAt)
	require.Equal(t, "hmac-sha256", listed[1].Algorithm)
	require.Empty(t, listed[1].Value)
	require.Empty(t, listed[1].PublicKey)
}

// TestRotateKeepsTheAlgorithm: a rotation naming no algorithm makes a key
// of the current one's, so a routine rotation never moves receivers between
// a public key and a shared secret unasked; an unknown algorithm is a
// *FieldError that changes nothing.
func TestRotateKeepsTheAlgorithm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := tenants.New(tenants.Config{Store: storetest.DB(t)})
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)

	for _, step := range []struct {
		ask, want signing.Algorithm
	}{
		{"", signing.HMACSHA256},
		{signing.Ed25519, signing.Ed25519},
		{"", signing.Ed25519},
		{signing.HMACSHA256, signing.HMACSHA256},
		{"", signing.HMACSHA256},
	} {
		rotated, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, time.Minute, step.ask, model.ActorCLI)
		require.NoError(t, err)
		require.Equal(t, string(step.want), rotated.Algorithm, "asked %q", step.ask)
		require.Equal(t, step.want == signing.HMACSHA256, strings.HasPrefix(rotated.Plaintext, signing.SecretPrefix))
		require.Equal(t, step.want == signing.Ed25519, strings.HasPrefix(rotated.PublicKey, signing.PublicKeyPrefix))
	}

	before, err := svc.SigningSecrets(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	for _, bad := range []signing.Algorithm{"rsa", "ED25519", "hmac"} {
		_, err := svc.RotateSigningSecret(ctx, acme.Tenant.ID, time.Minute, bad, model.ActorCLI)
		var fieldErr *tenants.FieldError
		require.ErrorAs(t, err, &fieldErr, "algorithm %q", bad)
		require.Equal(t, "algorithm", fieldErr.Field)
	}
	after, err := svc.SigningSecrets(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

package tenants_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/testenv"
	"github.com/hookwheel/hookwheel/tenants"
)

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := tenants.New(tenants.Config{Store: testenv.DB(t)})
	acme, err := svc.Create(ctx, "acme")
	require.NoError(t, err)
	other, err := svc.Create(ctx, "other")
	require.NoError(t, err)

	got, err := svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	require.Equal(t, acme.Tenant.ID, got.ID)
	require.Equal(t, "acme", got.Name)

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

	require.NoError(t, svc.Revoke(ctx, acme.Tenant.ID, keyID))
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

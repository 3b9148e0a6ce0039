package keyring_test

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/keyring"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	k, err := keyring.Parse(newKey(t))
	require.NoError(t, err)
	require.True(t, k.Enabled())

	sealed, err := k.Seal("whsec_abc", "tenant-1/ss_1")
	require.NoError(t, err)
	require.True(t, keyring.IsSealed(sealed))
	require.NotContains(t, sealed, "whsec_abc")
	again, err := k.Seal("whsec_abc", "tenant-1/ss_1")
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "every seal draws a fresh nonce")

	plain, err := k.Open(sealed, "tenant-1/ss_1")
	require.NoError(t, err)
	require.Equal(t, "whsec_abc", plain)

	_, err = k.Open(sealed, "tenant-2/ss_1")
	require.ErrorIs(t, err, keyring.ErrNoKey, "a value moved to another row does not open")

	tampered := sealed[:len(sealed)-2] + "AA"
	if tampered == sealed {
		tampered = sealed[:len(sealed)-2] + "BB"
	}
	_, err = k.Open(tampered, "tenant-1/ss_1")
	require.Error(t, err)

	plain, err = k.Open("whsec_plain", "anything")
	require.NoError(t, err)
	require.Equal(t, "whsec_plain", plain, "plaintext passes through")
}

func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKeyB64 := newKey(t), newKey(t)
	old, err := keyring.Parse("old:" + oldKey)
	require.NoError(t, err)
	sealedOld, err := old.Seal("whsec_x", "ctx")
	require.NoError(t, err)

	both, err := keyring.Parse("new:" + newKeyB64 + ",old:" + oldKey)
	require.NoError(t, err)
	require.Equal(t, "new", both.SealingKeyID())
	plain, err := both.Open(sealedOld, "ctx")
	require.NoError(t, err)
	require.Equal(t, "whsec_x", plain)
	require.True(t, both.NeedsRekey(sealedOld))
	require.True(t, both.NeedsRekey("whsec_plain"))

	sealedNew, err := both.Seal(plain, "ctx")
	require.NoError(t, err)
	require.False(t, both.NeedsRekey(sealedNew))
	require.True(t, strings.HasPrefix(sealedNew, "hwenc1:new:"))

	onlyNew, err := keyring.Parse("new:" + newKeyB64)
	require.NoError(t, err)
	_, err = onlyNew.Open(sealedOld, "ctx")
	require.ErrorIs(t, err, keyring.ErrNoKey)

	// A bare key keeps its fingerprint id, and opens under another name too.
	bare, err := keyring.Parse(oldKey)
	require.NoError(t, err)
	plain, err = bare.Open(sealedOld, "ctx")
	require.NoError(t, err)
	require.Equal(t, "whsec_x", plain)
}

func TestEmptyKeyring(t *testing.T) {
	t.Parallel()
	k, err := keyring.Parse("")
	require.NoError(t, err)
	require.False(t, k.Enabled())
	out, err := k.Seal("whsec_x", "ctx")
	require.NoError(t, err)
	require.Equal(t, "whsec_x", out)
	require.False(t, k.NeedsRekey("whsec_x"))

	full, err := keyring.Parse(newKey(t))
	require.NoError(t, err)
	sealed, err := full.Seal("whsec_x", "ctx")
	require.NoError(t, err)
	_, err = k.Open(sealed, "ctx")
	require.ErrorIs(t, err, keyring.ErrNoKey)
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	good := newKey(t)
	for _, tc := range []struct{ name, in, want string }{
		{"not base64", "!!!", "not base64"},
		{"short", base64.StdEncoding.EncodeToString([]byte("short")), "want 32 bytes"},
		{"unnamed in a list", good + "," + good, "names each one"},
		{"duplicate id", "a:" + good + ",a:" + good, "used twice"},
		{"bad id", "a b:" + good, "letters, digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := keyring.Parse(tc.in)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

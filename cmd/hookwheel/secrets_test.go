package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestSecretsCommand: the operator rotates a tenant to an Ed25519 key pair
// and back from the command line, which prints the public key or the secret
// as the API shows them, and lists the secrets signing now; bad flags are
// usage errors.
func TestSecretsCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := environment{databaseURL: storetest.DatabaseURL(t), keyring: &keyring.Keyring{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := secretsCommand(ctx, args, env, logger, &out)
		return out.String(), err
	}
	svc, closeDB, err := openTenants(ctx, env, logger)
	require.NoError(t, err)
	t.Cleanup(closeDB)
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	id := acme.Tenant.ID.String()

	out, err := run("rotate", "--tenant", id, "--algorithm", "ed25519", "--grace", "1h", "--json")
	require.NoError(t, err)
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &created), "stdout must be only the JSON: %q", out)
	require.Equal(t, "ed25519", created["algorithm"])
	require.NotContains(t, created, "signing_secret")
	publicKey, _ := created["public_key"].(string)
	require.True(t, strings.HasPrefix(publicKey, "whpk_"), out)

	out, err = run("list", "--tenant", id)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Contains(t, lines[1], "ed25519")
	require.Contains(t, lines[1], "current")
	require.Contains(t, lines[1], publicKey)
	require.Contains(t, lines[2], "hmac-sha256")
	require.Contains(t, lines[2], "in grace")

	// No --algorithm keeps Ed25519; the text output names the public key.
	out, err = run("rotate", "--tenant", id, "--grace", "0s")
	require.NoError(t, err)
	require.Contains(t, out, "(ed25519)")
	require.Contains(t, out, "Public key:      whpk_")
	require.NotContains(t, out, "whsk_")

	out, err = run("rotate", "--tenant", id, "--algorithm", "hmac-sha256")
	require.NoError(t, err)
	require.Contains(t, out, "Signing secret:  whsec_")

	out, err = run("list", "--tenant", id, "--json")
	require.NoError(t, err)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 2)
	require.Equal(t, "hmac-sha256", listed[0]["algorithm"])
	require.Equal(t, true, listed[0]["current"])
	require.Equal(t, "ed25519", listed[1]["algorithm"])

	for _, args := range [][]string{
		{}, {"frobnicate"}, {"rotate"}, {"rotate", "--tenant", "nope"},
		{"rotate", "--tenant", id, "--algorithm", "rsa"},
		{"rotate", "--tenant", id, "--grace", "169h"},
		{"list", "--tenant", id, "--algorithm", "ed25519"},
		{"list", "--tenant", id, "extra"},
	} {
		_, err := run(args...)
		var usage usageError
		require.ErrorAs(t, err, &usage, "secrets %v", args)
	}
	_, err = run("rotate", "--tenant", "019aa8e0-1b2c-7d3e-8f40-5a6b7c8d9e0f")
	require.ErrorContains(t, err, "no tenant")
	require.NotErrorAs(t, err, new(usageError))

	after, err := svc.SigningSecrets(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Len(t, after, 2, "the refusals rotated nothing")
}

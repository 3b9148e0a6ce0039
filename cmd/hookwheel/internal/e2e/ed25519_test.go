package e2e_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// TestEd25519Signatures: a tenant of a node that seals its secrets rotates
// to an Ed25519 key pair; a webhook then reaches a real receiver carrying
// the new key's v1a signature first and, during the grace period, the old
// secret's v1 beside it: the Go SDK verifies it with the public key that
// GET /v1/signing-secrets shows, URL and EdDSA JWT included, and with the
// old secret alone. Rotating back to HMAC with no grace leaves the v1
// signature only.
func TestEd25519Signatures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Keyring = mustKeyring(t, "k1:"+newEncryptionKey(t)) })
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	ctx := context.Background()

	rotated, err := acme.client.RotateSigningSecretWithResponse(ctx, openapi.SigningSecretRotateRequest{
		Algorithm: ptr(openapi.SigningAlgorithm("ed25519")), Grace: ptr("1h"),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, rotated.StatusCode(), string(rotated.Body))
	require.Empty(t, rotated.JSON201.SigningSecret, "an Ed25519 key has no secret to show")
	require.NotContains(t, string(rotated.Body), "whsk_")

	listed, err := acme.client.ListSigningSecretsWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, listed.StatusCode(), string(listed.Body))
	require.Len(t, listed.JSON200.Data, 2)
	current := listed.JSON200.Data[0]
	require.Equal(t, rotated.JSON201.ID, current.ID)
	require.Equal(t, openapi.SigningAlgorithm("ed25519"), current.Algorithm)
	require.Equal(t, rotated.JSON201.PublicKey, current.PublicKey)
	require.Equal(t, openapi.SigningAlgorithm("hmac-sha256"), listed.JSON200.Data[1].Algorithm)
	publicKey := current.PublicKey

	url := recv.URL + "/ed25519"
	during := deliverOne(t, acme, recv, url)
	entries := strings.Fields(during.header.Get("webhook-signature"))
	require.Len(t, entries, 2)
	require.True(t, strings.HasPrefix(entries[0], "v1a,"), "the new key's signature first: %q", entries)
	require.True(t, strings.HasPrefix(entries[1], "v1,"), "%q", entries)

	require.NoError(t, webhook.Verify([]string{publicKey}, during.header, during.body, webhook.WithURL(url)))
	require.NoError(t, webhook.Verify([]string{acme.signingSecret}, during.header, during.body),
		"the old secret verifies during the grace period")
	oldWH, err := standardwebhooks.NewWebhook(acme.signingSecret)
	require.NoError(t, err)
	require.NoError(t, oldWH.Verify(during.body, during.header), "a Standard Webhooks library with the old secret")

	// The JWT is EdDSA, by the current key, named in kid.
	pub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(publicKey, "whpk_"))
	require.NoError(t, err)
	token, err := jwt.Parse(during.header.Get("Hookwheel-Signature"),
		func(*jwt.Token) (any, error) { return ed25519.PublicKey(pub), nil }, jwt.WithValidMethods([]string{"EdDSA"}))
	require.NoError(t, err)
	require.Equal(t, current.ID, token.Header["kid"])

	// Back to HMAC at once: the public key no longer verifies what follows.
	back, err := acme.client.RotateSigningSecretWithResponse(ctx, openapi.SigningSecretRotateRequest{
		Algorithm: ptr(openapi.SigningAlgorithm("hmac-sha256")), Grace: ptr("0s"),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, back.StatusCode(), string(back.Body))
	require.Empty(t, back.JSON201.PublicKey)
	after := deliverOne(t, acme, recv, recv.URL+"/hmac-again")
	require.Len(t, strings.Fields(after.header.Get("webhook-signature")), 1)
	require.NoError(t, webhook.Verify([]string{back.JSON201.SigningSecret}, after.header, after.body, webhook.WithURL(recv.URL+"/hmac-again")))
	require.ErrorIs(t, webhook.Verify([]string{publicKey}, after.header, after.body), webhook.ErrSignature)
}

// deliverOne schedules a task to url for now and returns its webhook as the
// receiver got it.
func deliverOne(t *testing.T, tn *tenant, recv *receiver, url string) delivery {
	t.Helper()
	task := tn.schedule(t, openapi.TaskRequest{URL: url, Body: `{"order": 42}`})
	id := task.ID.String()
	for _, d := range recv.waitFor(t, 15*time.Second, "the webhook to "+url, func(ds []delivery) bool { return distinctIDs(ds)[id] > 0 }) {
		if d.webhookID() == id {
			return d
		}
	}
	t.Fatalf("no webhook %s", id)
	return delivery{}
}

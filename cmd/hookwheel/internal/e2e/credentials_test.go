package e2e_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/tenants"
)

// problemType reads a problem+json body's type.
func problemType(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), string(body))
	var p struct {
		Type   string `json:"type"`
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(body, &p), string(body))
	return strings.TrimPrefix(p.Type, "urn:hookwheel:problem:")
}

// waitUnauthorized polls a call with apiKey until it answers 401, failing
// the test if that takes longer than within.
func waitUnauthorized(t *testing.T, base, apiKey string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		resp, body := rawRequest(t, http.MethodGet, base+"/v1/tasks", apiKey, nil, nil)
		if resp.StatusCode == http.StatusUnauthorized {
			return time.Since(start)
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		if time.Since(start) > within {
			t.Fatalf("key still accepted %s later", within)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// TestAPIKeys: a tenant holds several keys with scopes and expiry, manages
// them itself, and a revoked or expired key is refused on every node within
// 5 seconds.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n1, n2 := e.startNode(), e.startNode()
	acme := e.createTenant(n1, "acme")
	other := e.createTenant(n1, "other")
	ctx := context.Background()

	createKey := func(client *openapi.ClientWithResponses, req openapi.APIKeyRequest) *openapi.CreateKeyResponse {
		t.Helper()
		resp, err := client.CreateKeyWithResponse(ctx, req)
		require.NoError(t, err)
		return resp
	}
	reader := createKey(acme.client, openapi.APIKeyRequest{Name: ptr("reader"), Scopes: []openapi.Scope{"tasks:read"}})
	require.Equal(t, http.StatusCreated, reader.StatusCode(), string(reader.Body))
	require.Equal(t, []openapi.Scope{"tasks:read"}, reader.JSON201.Scopes)
	require.Equal(t, "reader", reader.JSON201.Name)
	acmeKeyID, _ := tenants.KeyID(acme.apiKey)
	require.Equal(t, "key:"+acmeKeyID, reader.JSON201.CreatedBy)
	readerKey := reader.JSON201.APIKey

	// The scope decides, on any node.
	resp, body := rawRequest(t, http.MethodGet, n2.base+"/v1/tasks", readerKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = rawRequest(t, http.MethodPost, n2.base+"/v1/tasks", readerKey, []byte(`{"url": "https://example.com/x"}`), nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))
	require.Equal(t, "insufficient-scope", problemType(t, resp, body))
	require.Contains(t, string(body), "tasks:write")
	resp, body = rawRequest(t, http.MethodGet, n2.base+"/v1/keys", readerKey, nil, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))

	// A key hands on at most its own scopes.
	manager := createKey(acme.client, openapi.APIKeyRequest{Name: ptr("manager"), Scopes: []openapi.Scope{"keys:manage", "tasks:read"}})
	require.Equal(t, http.StatusCreated, manager.StatusCode(), string(manager.Body))
	managerClient := clientFor(t, n1.base, manager.JSON201.APIKey)
	escalate := createKey(managerClient, openapi.APIKeyRequest{Scopes: []openapi.Scope{"tasks:write"}})
	require.Equal(t, http.StatusForbidden, escalate.StatusCode(), string(escalate.Body))
	escalate = createKey(managerClient, openapi.APIKeyRequest{})
	require.Equal(t, http.StatusForbidden, escalate.StatusCode(), "no scopes means every scope, which the manager lacks: %s", escalate.Body)
	narrower := createKey(managerClient, openapi.APIKeyRequest{Scopes: []openapi.Scope{"tasks:read"}})
	require.Equal(t, http.StatusCreated, narrower.StatusCode(), string(narrower.Body))

	// Bad requests are refused field by field.
	for _, tc := range []struct {
		body, field string
	}{
		{`{"scopes": ["tasks:delete"]}`, "scopes[0]"},
		{`{"expires_at": "2001-01-01T00:00:00Z"}`, "expires_at"},
		{`{"name": "` + strings.Repeat("n", 101) + `"}`, "name"},
		{`{"nmae": "typo"}`, "nmae"},
		{`{"expires_at": "tomorrow"}`, "expires_at"},
	} {
		resp, body := rawRequest(t, http.MethodPost, n1.base+"/v1/keys", acme.apiKey, []byte(tc.body), nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", tc.body, body)
		require.Contains(t, string(body), `"field":"`+tc.field+`"`, tc.body)
	}

	// Listing shows every key, never a secret.
	list, err := acme.client.ListKeysWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), string(list.Body))
	require.Len(t, list.JSON200.Data, 4)
	require.NotContains(t, string(list.Body), readerKey[len(readerKey)-20:])

	// Revoked on n1: refused there at once, on n2 within 5 seconds.
	revoke, err := acme.client.RevokeKeyWithResponse(ctx, reader.JSON201.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, revoke.StatusCode(), string(revoke.Body))
	require.NotNil(t, revoke.JSON200.RevokedAt)
	resp, _ = rawRequest(t, http.MethodGet, n1.base+"/v1/tasks", readerKey, nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	took := waitUnauthorized(t, n2.base, readerKey, 5*time.Second)
	t.Logf("revocation seen by the other node after %s", took)

	// Another tenant's key, or none, is not found.
	otherKeyID, _ := tenants.KeyID(other.apiKey)
	gone, err := acme.client.RevokeKeyWithResponse(ctx, otherKeyID)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, gone.StatusCode(), string(gone.Body))
	resp, body = rawRequest(t, http.MethodGet, n1.base+"/v1/tasks", other.apiKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the other tenant's key still works: %s", body)

	// An expired key is refused on every node.
	expiring := createKey(acme.client, openapi.APIKeyRequest{ExpiresAt: ptr(time.Now().Add(1500 * time.Millisecond))})
	require.Equal(t, http.StatusCreated, expiring.StatusCode(), string(expiring.Body))
	resp, _ = rawRequest(t, http.MethodGet, n2.base+"/v1/tasks", expiring.JSON201.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	waitUnauthorized(t, n2.base, expiring.JSON201.APIKey, 5*time.Second)

	// last_used_at is recorded, in batches.
	deadline := time.Now().Add(15 * time.Second)
	for {
		list, err := acme.client.ListKeysWithResponse(ctx)
		require.NoError(t, err)
		var used bool
		for _, k := range list.JSON200.Data {
			if k.ID == manager.JSON201.ID && k.LastUsedAt != nil {
				used = true
			}
		}
		if used {
			break
		}
		require.True(t, time.Now().Before(deadline), "last_used_at of the manager key not recorded")
		time.Sleep(100 * time.Millisecond) // polling interval
	}

	// The operator mints a recovery key and revokes keys.
	admin := clientFor(t, n1.base, "admin-token")
	recovery, err := admin.CreateTenantKeyWithResponse(ctx, acme.id, openapi.APIKeyRequest{Name: ptr("recovery")})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, recovery.StatusCode(), string(recovery.Body))
	require.Equal(t, "operator", recovery.JSON201.CreatedBy)
	resp, _ = rawRequest(t, http.MethodGet, n2.base+"/v1/keys", recovery.JSON201.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	adminList, err := admin.ListTenantKeysWithResponse(ctx, acme.id)
	require.NoError(t, err)
	require.Len(t, adminList.JSON200.Data, 6)
	adminRevoke, err := admin.RevokeTenantKeyWithResponse(ctx, acme.id, recovery.JSON201.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, adminRevoke.StatusCode(), string(adminRevoke.Body))
	missing, err := admin.ListTenantKeysWithResponse(ctx, uuid.New())
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, missing.StatusCode())

	// Every change is in the audit log: the tenant sees its own entries.
	audit, err := acme.client.ListTenantAuditWithResponse(ctx, &openapi.ListTenantAuditParams{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, audit.StatusCode(), string(audit.Body))
	var actions []string
	for _, a := range audit.JSON200.Data {
		require.Equal(t, acme.id, *a.TenantID)
		actions = append(actions, a.Action+" by "+a.Actor)
	}
	require.Equal(t, []string{
		"key.revoked by operator",
		"key.created by operator",
		"key.created by key:" + acmeKeyID,
		"key.revoked by key:" + acmeKeyID,
		"key.created by key:" + manager.JSON201.ID,
		"key.created by key:" + acmeKeyID,
		"key.created by key:" + acmeKeyID,
		"tenant.created by cli",
	}, actions)
	page, err := admin.ListAuditWithResponse(ctx, &openapi.ListAuditParams{TenantID: &acme.id, Limit: ptr(3)})
	require.NoError(t, err)
	require.Len(t, page.JSON200.Data, 3)
	require.NotNil(t, page.JSON200.NextCursor)
	rest, err := admin.ListAuditWithResponse(ctx, &openapi.ListAuditParams{TenantID: &acme.id, Cursor: page.JSON200.NextCursor})
	require.NoError(t, err)
	require.Len(t, rest.JSON200.Data, len(actions)-3)
}

// sign computes a Standard Webhooks signature entry by hand, to tell which
// secret made which entry.
func sign(t *testing.T, secret string, d delivery) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.header.Get("webhook-id") + "." + d.header.Get("webhook-timestamp") + "."))
	mac.Write(d.body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// TestSigningSecretRotation: while tasks fire continuously, a rotation with
// a grace period makes every webhook carry both signatures, the new one
// first, until the grace ends; no webhook is ever unsigned or signed by a
// secret the receiver cannot know; the JWT names its secret in kid.
func TestSigningSecretRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	ctx := context.Background()

	listed, err := acme.client.ListSigningSecretsWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, listed.StatusCode(), string(listed.Body))
	require.Len(t, listed.JSON200.Data, 1)
	oldID := listed.JSON200.Data[0].ID
	require.NotContains(t, string(listed.Body), acme.signingSecret)

	// Tasks fire every 50 ms from now until stopped.
	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		created   []uuid.UUID
		createErr error
	)
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				resp, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{},
					openapi.TaskRequest{URL: recv.URL + "/rotate", Body: `{"n": 1}`})
				if err == nil && resp.JSON201 == nil {
					err = fmt.Errorf("create task: %d %s", resp.StatusCode(), resp.Body)
				}
				var task openapi.Task
				if err == nil {
					task, err = resp.JSON201.AsTask()
				}
				if err != nil {
					createErr = err
					return
				}
				created = append(created, task.ID)
			}
		}
	})
	recv.waitFor(t, 10*time.Second, "webhooks before the rotation", func(ds []delivery) bool { return len(ds) >= 5 })

	rotated, err := acme.client.RotateSigningSecretWithResponse(ctx, openapi.SigningSecretRotateRequest{Grace: ptr("2s")})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, rotated.StatusCode(), string(rotated.Body))
	newSecret, newID := rotated.JSON201.SigningSecret, rotated.JSON201.ID
	graceEnds := rotated.JSON201.GraceEndsAt
	require.NotEqual(t, acme.signingSecret, newSecret)

	during, err := acme.client.ListSigningSecretsWithResponse(ctx)
	require.NoError(t, err)
	require.Len(t, during.JSON200.Data, 2)
	require.Equal(t, newID, during.JSON200.Data[0].ID)
	require.True(t, during.JSON200.Data[0].Current)
	require.Equal(t, oldID, during.JSON200.Data[1].ID)
	require.WithinDuration(t, graceEnds, *during.JSON200.Data[1].ExpiresAt, time.Millisecond)

	// Fire on until well past the grace period, then let every task land.
	recv.waitFor(t, 20*time.Second, "webhooks signed after the grace period", func(ds []delivery) bool {
		for _, d := range ds {
			if d.arrived.After(graceEnds.Add(1500 * time.Millisecond)) {
				return true
			}
		}
		return false
	})
	close(stop)
	wg.Wait()
	require.NoError(t, createErr)
	for _, id := range created {
		acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
	}

	oldWH, err := standardwebhooks.NewWebhook(acme.signingSecret)
	require.NoError(t, err)
	newWH, err := standardwebhooks.NewWebhook(newSecret)
	require.NoError(t, err)
	secretByKid := map[string]string{oldID: acme.signingSecret, newID: newSecret}
	var both, onlyOld, onlyNew int
	for _, d := range recv.snapshot() {
		// Standard Webhooks rejects timestamps older than 5 minutes, so
		// verify at once; every webhook verifies with some secret.
		oldOK, newOK := oldWH.Verify(d.body, d.header) == nil, newWH.Verify(d.body, d.header) == nil
		require.True(t, oldOK || newOK, "webhook %s verifies with neither secret", d.webhookID())
		entries := strings.Fields(d.header.Get("webhook-signature"))
		switch {
		case oldOK && newOK:
			both++
			require.Equal(t, []string{sign(t, newSecret, d), sign(t, acme.signingSecret, d)}, entries, "the new secret's signature first")
		case oldOK:
			onlyOld++
			require.Len(t, entries, 1)
		default:
			onlyNew++
			require.Len(t, entries, 1)
		}
		// Signed after the grace period: the old secret no longer verifies.
		unix, err := strconv.ParseInt(d.header.Get("webhook-timestamp"), 10, 64)
		require.NoError(t, err)
		signedAt := time.Unix(unix, 0)
		if signedAt.After(graceEnds.Add(time.Second)) {
			require.False(t, oldOK, "webhook %s signed at %s, after the grace ended at %s, verifies with the old secret", d.webhookID(), signedAt, graceEnds)
		}

		// The JWT is signed by the current secret, named in kid.
		token, err := jwt.Parse(d.header.Get("Hookwheel-Signature"), func(tok *jwt.Token) (any, error) {
			secret, ok := secretByKid[tok.Header["kid"].(string)]
			require.True(t, ok, "kid %v", tok.Header["kid"])
			return base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		}, jwt.WithValidMethods([]string{"HS256"}))
		require.NoError(t, err)
		if newOK {
			require.Equal(t, newID, token.Header["kid"])
		}
	}
	require.Positive(t, onlyOld, "webhooks before the rotation")
	require.Positive(t, both, "webhooks during the grace period")
	require.Positive(t, onlyNew, "webhooks after the grace period")
	t.Logf("webhooks: %d old only, %d both, %d new only", onlyOld, both, onlyNew)

	after, err := acme.client.ListSigningSecretsWithResponse(ctx)
	require.NoError(t, err)
	require.Len(t, after.JSON200.Data, 1)
	require.Equal(t, newID, after.JSON200.Data[0].ID)

	// Bad grace periods.
	for _, body := range []string{`{"grace": "169h"}`, `{"grace": "-1s"}`, `{"grace": "soon"}`, `{"grace_period": "1h"}`} {
		resp, b := rawRequest(t, http.MethodPost, n.base+"/v1/signing-secrets/rotate", acme.apiKey, []byte(body), nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", body, b)
	}
	// No body: the default grace of 24h.
	resp, b := rawRequest(t, http.MethodPost, n.base+"/v1/signing-secrets/rotate", acme.apiKey, nil, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var created24 openapi.SigningSecretCreated
	require.NoError(t, json.Unmarshal(b, &created24))
	require.WithinDuration(t, time.Now().Add(24*time.Hour), created24.GraceEndsAt, time.Minute)
}

func newEncryptionKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func mustKeyring(t *testing.T, spec string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(spec)
	require.NoError(t, err)
	return k
}

// TestEncryptionAtRest: with an encryption key, the database holds no
// signing secret in plaintext; rekeying under a new key, beside a serving
// node, keeps every webhook verifiable, and a node with only the new key
// then signs them all.
func TestEncryptionAtRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k1, k2 := "k1:"+newEncryptionKey(t), "k2:"+newEncryptionKey(t)
	withKeys := func(spec string) func(*app.Config) {
		return func(c *app.Config) { c.Keyring = mustKeyring(t, spec) }
	}
	recv := newReceiver(t)
	fireAndVerify := func(n *node, tn *tenant) {
		t.Helper()
		task := tn.schedule(t, openapi.TaskRequest{URL: recv.URL + "/sealed", Body: "x"})
		ds := recv.waitFor(t, 10*time.Second, "the webhook", func(ds []delivery) bool { return distinctIDs(ds)[task.ID.String()] > 0 })
		wh, err := standardwebhooks.NewWebhook(tn.signingSecret)
		require.NoError(t, err)
		for _, d := range ds {
			if d.webhookID() == task.ID.String() {
				require.NoError(t, wh.Verify(d.body, d.header))
			}
		}
	}
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: e.databaseURL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	conn, err := pgx.Connect(context.Background(), e.databaseURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	storedSecrets := func() string {
		var text string
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT coalesce(string_agg(signing_secrets::text, ' '), '') FROM tenants`).Scan(&text))
		return text
	}

	// Without a key, secrets are plaintext, and readiness says so.
	plain := e.startNode()
	resp, body := rawRequest(t, http.MethodGet, plain.base+"/readyz", "", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "HOOKWHEEL_ENCRYPTION_KEY is not set")
	legacy := e.createTenant(plain, "legacy")
	require.Contains(t, storedSecrets(), strings.TrimPrefix(legacy.signingSecret, "whsec_"))
	plain.stop(t)

	// Under k1, new secrets are sealed; old plaintext ones still sign.
	n1 := e.startNode(withKeys(k1))
	acme := e.createTenant(n1, "acme")
	stored := storedSecrets()
	require.NotContains(t, stored, strings.TrimPrefix(acme.signingSecret, "whsec_"))
	require.Contains(t, stored, "hwenc1:k1:")
	resp, body = rawRequest(t, http.MethodGet, n1.base+"/readyz", "", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "sealed with key k1")
	legacy.client = clientFor(t, n1.base, legacy.apiKey)
	fireAndVerify(n1, acme)
	fireAndVerify(n1, legacy)

	// k2 joins in front of k1 on a serving node; rekey seals everything
	// (the legacy plaintext included) under k2 while it serves.
	n2 := e.startNode(withKeys(k2 + "," + k1))
	n1.stop(t)
	acme.client, legacy.client = clientFor(t, n2.base, acme.apiKey), clientFor(t, n2.base, legacy.apiKey)
	fireAndVerify(n2, acme)
	res, err := tenants.New(tenants.Config{Store: db, Keyring: mustKeyring(t, k2+","+k1)}).Rekey(context.Background(), model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, tenants.RekeyResult{Tenants: 2, Scanned: 2, Secrets: 2}, res)
	stored = storedSecrets()
	require.NotContains(t, stored, "whsec_")
	require.NotContains(t, stored, "hwenc1:k1:")
	require.Equal(t, 2, strings.Count(stored, "hwenc1:k2:"))
	fireAndVerify(n2, acme)
	fireAndVerify(n2, legacy)

	// Rekeying again finds nothing to do.
	res, err = tenants.New(tenants.Config{Store: db, Keyring: mustKeyring(t, k2+","+k1)}).Rekey(context.Background(), model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, 0, res.Secrets)

	// k1 can go: a node with k2 alone signs every tenant's webhooks.
	n3 := e.startNode(withKeys(k2))
	n2.stop(t)
	acme.client, legacy.client = clientFor(t, n3.base, acme.apiKey), clientFor(t, n3.base, legacy.apiKey)
	fireAndVerify(n3, acme)
	fireAndVerify(n3, legacy)

	// The rekey is in the installation's audit log.
	entries, err := db.ListAudit(context.Background(), model.AuditFilter{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, "secrets.rekeyed", entries[0].Action)
	require.Nil(t, entries[0].TenantID)
}

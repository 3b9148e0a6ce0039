package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestSignupEnv: HOOKWHEEL_SIGNUP is off unless set to invite or open, and
// anything else stops the node with the variable named.
func TestSignupEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env     map[string]string
		want    tenants.SignupMode
		perAddr int
		bad     string
	}{
		{env: nil, want: tenants.SignupOff},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "off"}, want: tenants.SignupOff},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "invite"}, want: tenants.SignupInvite},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "Open", "HOOKWHEEL_SIGNUP_PER_ADDRESS": "2"}, want: tenants.SignupOpen, perAddr: 2},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "yes"}, bad: "HOOKWHEEL_SIGNUP: want off, invite or open"},
		{env: map[string]string{"HOOKWHEEL_SIGNUP_PER_ADDRESS": "five"}, bad: "HOOKWHEEL_SIGNUP_PER_ADDRESS"},
		{env: map[string]string{"HOOKWHEEL_SIGNUP_PER_ADDRESS": "20", "HOOKWHEEL_SIGNUP_PER_HOUR": "10"}, bad: "HOOKWHEEL_SIGNUP_PER_HOUR"},
	} {
		e, err := loadEnv(func(k string) string { return tt.env[k] })
		if tt.bad != "" {
			require.ErrorContains(t, err, tt.bad, "%v", tt.env)
			continue
		}
		require.NoError(t, err, "%v", tt.env)
		require.Equal(t, tt.want, e.signup.mode, "%v", tt.env)
		require.Equal(t, tt.perAddr, e.signup.limit.PerAddress, "%v", tt.env)
	}
}

// TestSignupCommands: the operator makes, lists and revokes invites from
// the command line, on the database; a person signs up with one through the
// API, with `hookwheel signup`.
func TestSignupCommands(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	dbURL := storetest.DatabaseURL(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := app.New(ctx, app.Config{
		DatabaseURL: dbURL, RedisURL: storetest.RedisURL(), RedisKeyPrefix: storetest.RedisPrefix(t),
		Addr: "127.0.0.1:0", AdminToken: "admin-token", Logger: logger, Signup: tenants.SignupInvite,
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("node did not stop within 30s")
		}
	})
	env, err := loadEnv(func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL, "HOOKWHEEL_SIGNUP": "invite"}[k]
	})
	require.NoError(t, err)
	invites := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := invitesCommand(ctx, args, env, logger, &out)
		return out.String(), err
	}
	w := &cliWorld{base: "http://" + node.Addr()}

	out, err := invites("create", "--expires-in", "1h", "--note", "for initech")
	require.NoError(t, err)
	var inv hookwheel.SignupResult
	var created struct {
		ID         string `json:"id"`
		InviteCode string `json:"invite_code"`
		Status     string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &created), out)
	require.Equal(t, "unused", created.Status)

	noCode := w.run(t, "", []string{"signup", "--name", "initech"})
	require.Equal(t, exitAuth, noCode.code, noCode.stderr)
	require.Contains(t, noCode.stderr, "invite code")
	require.Equal(t, exitUsage, w.run(t, "", []string{"signup"}).code, "--name is required")

	r := w.run(t, "", []string{"signup", "--name", "initech", "--invite-code", created.InviteCode, "--json"})
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &inv), r.stdout)
	require.Equal(t, "initech", inv.Tenant.Name)
	require.True(t, strings.HasPrefix(inv.APIKey, "hw_"), inv.APIKey)
	again := w.run(t, "", []string{"signup", "--name", "again", "--invite-code", created.InviteCode})
	require.Equal(t, exitAuth, again.code, again.stderr)
	require.Contains(t, again.stderr, "already used")

	out, err = invites("list")
	require.NoError(t, err)
	require.Contains(t, out, created.ID)
	require.Contains(t, out, inv.Tenant.ID.String())
	require.NotContains(t, out, created.InviteCode)

	_, err = invites("revoke", created.ID)
	require.ErrorContains(t, err, "a used invite is kept")
	out, err = invites("create")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &created), out)
	out, err = invites("revoke", created.ID)
	require.NoError(t, err)
	require.Contains(t, out, "revoked invite "+created.ID)
	_, err = invites("revoke", "nope")
	require.Equal(t, exitUsage, exitCode(err))
	_, err = invites("create", "--expires-in", "1s")
	require.ErrorContains(t, err, "expires_in")
}

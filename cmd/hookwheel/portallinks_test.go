package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientPortalLinks runs the portal-links commands against a live node:
// a link created (key=value read as key:value), its URL opening the label's
// tasks, listed without its token, revoked.
func TestClientPortalLinks(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	mine := w.task(t, "tasks", "create", "--url", w.receiver.URL+"/later", "--in", "1h", "--label", "customer=42")
	w.task(t, "tasks", "create", "--url", w.receiver.URL+"/later", "--in", "1h", "--label", "customer=43")

	out := w.ok(t, "portal-links", "create", "customer=42", "--expires-in", "2h", "--name", "Acme")
	require.Regexp(t, `URL:\s+`+w.base+`/portal/#hwpl_[a-z2-7]+_[a-z2-7]+`, out)
	require.Regexp(t, `Label:\s+customer:42`, out)
	require.Contains(t, out, "The URL is shown only now")
	var link hookwheel.PortalLinkCreated
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "portal-links", "create", "customer:42", "--json")), &link))
	token := link.URL[strings.Index(link.URL, "#")+1:]

	req, err := http.NewRequest(http.MethodGet, w.base+"/v1/portal/tasks", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var page struct {
		Data []hookwheel.Task `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, page.Data, 1)
	require.Equal(t, mine.ID, page.Data[0].ID)

	out = w.ok(t, "portal-links", "list")
	require.Regexp(t, `(?m)^ID\s+LABEL\s+NAME\s+EXPIRES\s+CREATED BY$`, out)
	require.Contains(t, out, link.ID.String())
	require.NotContains(t, out, token[len("hwpl_")+27:])
	out = w.ok(t, "portal-links", "revoke", link.ID.String())
	require.Contains(t, out, "Revoked: portal link "+link.ID.String())
	require.NotContains(t, w.ok(t, "portal-links", "list"), link.ID.String())

	r := w.run(t, "", []string{"portal-links", "create", "customer:42", "--expires-in", "1000h"})
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "expires_in")
	r = w.run(t, "", []string{"portal-links", "revoke", "not-an-id"})
	require.NotZero(t, r.code)
}

// TestPortalEnv: HOOKWHEEL_PUBLIC_URL is an origin, and
// HOOKWHEEL_PORTAL_FRAME_ANCESTORS a frame-ancestors list; anything else
// stops the node with the variable named.
func TestPortalEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env                 map[string]string
		publicURL, ancestor string
		bad                 string
	}{
		{env: nil, ancestor: "*"},
		{env: map[string]string{"HOOKWHEEL_PUBLIC_URL": "https://hooks.example.com/", "HOOKWHEEL_PORTAL_FRAME_ANCESTORS": "'self' https://app.example.com"},
			publicURL: "https://hooks.example.com", ancestor: "'self' https://app.example.com"},
		{env: map[string]string{"HOOKWHEEL_PUBLIC_URL": "hooks.example.com"}, bad: "HOOKWHEEL_PUBLIC_URL"},
		{env: map[string]string{"HOOKWHEEL_PUBLIC_URL": "https://hooks.example.com/base"}, bad: "HOOKWHEEL_PUBLIC_URL"},
		{env: map[string]string{"HOOKWHEEL_PUBLIC_URL": "ftp://hooks.example.com"}, bad: "HOOKWHEEL_PUBLIC_URL"},
		{env: map[string]string{"HOOKWHEEL_PORTAL_FRAME_ANCESTORS": "*; script-src *"}, bad: "HOOKWHEEL_PORTAL_FRAME_ANCESTORS"},
	} {
		e, err := loadEnv(func(k string) string { return tt.env[k] })
		if tt.bad != "" {
			require.ErrorContains(t, err, tt.bad)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.publicURL, e.portal.publicURL)
		require.Equal(t, tt.ancestor, e.portal.frameAncestors)
	}
}

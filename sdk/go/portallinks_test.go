package hookwheel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

func portalLinkJSON(id uuid.UUID, revoked bool) map[string]any {
	now := time.Now().UTC()
	out := map[string]any{"id": id, "label": "customer:42", "name": "Acme", "description": "", "created_by": "key:k",
		"created_at": now.Format(time.RFC3339Nano), "expires_at": now.Add(time.Hour).Format(time.RFC3339Nano)}
	if revoked {
		out["revoked_at"] = now.Format(time.RFC3339Nano)
	}
	return out
}

// TestPortalLinks: a create sends the spec once, never again after a 503
// (a repeat would make a second link); a list pages; a revoke is retried.
func TestPortalLinks(t *testing.T) {
	t.Parallel()
	id := uuid.Must(uuid.NewV7())
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		switch {
		case r.Method == http.MethodPost && nth == 1:
			created := portalLinkJSON(id, false)
			created["url"] = "https://hooks.example.com/portal/#hwpl_a_b"
			writeJSON(w, http.StatusCreated, created)
		case r.Method == http.MethodPost:
			writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
		case r.Method == http.MethodGet && r.URL.Query().Get("cursor") == "":
			writeJSON(w, http.StatusOK, map[string]any{"data": []any{portalLinkJSON(id, false)}, "next_cursor": "c1"})
		case r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, map[string]any{"data": []any{portalLinkJSON(uuid.Must(uuid.NewV7()), false)}})
		case r.Method == http.MethodDelete && nth == 5:
			writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
		default:
			writeJSON(w, http.StatusOK, portalLinkJSON(id, true))
		}
	})
	c := f.client(t)
	ctx := context.Background()

	link, err := c.CreatePortalLink(ctx, hookwheel.PortalLinkSpec{Label: "customer:42", ExpiresIn: 24 * time.Hour, Name: "Acme"})
	require.NoError(t, err)
	require.Equal(t, "https://hooks.example.com/portal/#hwpl_a_b", link.URL)
	require.Equal(t, id, link.ID)
	_, err = c.CreatePortalLink(ctx, hookwheel.PortalLinkSpec{Label: "customer:42"})
	require.ErrorIs(t, err, hookwheel.ErrServer, "not retried")

	var listed []uuid.UUID
	for l, err := range c.ListPortalLinks(ctx, 1) {
		require.NoError(t, err)
		listed = append(listed, l.ID)
	}
	require.Len(t, listed, 2)
	require.Equal(t, id, listed[0])

	revoked, err := c.RevokePortalLink(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)

	got := f.got()
	require.Len(t, got, 6)
	require.Equal(t, "/v1/portal-links", got[0].path)
	require.JSONEq(t, `{"label": "customer:42", "expires_in": "24h0m0s", "name": "Acme"}`, string(got[0].body))
	require.JSONEq(t, `{"label": "customer:42"}`, string(got[1].body), "zeros left to the server's defaults")
	require.Equal(t, "limit=1", got[2].query)
	require.Equal(t, "/v1/portal-links/"+id.String(), got[4].path)
	require.Equal(t, http.MethodDelete, got[5].method, "a revoke is retried")
}

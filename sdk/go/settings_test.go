package hookwheel_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestSettings: Settings reads GET /v1/settings; UpdateSettings sends a
// patch with only what it changes (null to clear), is retried like a read,
// and a refusal is ErrInvalid.
func TestSettings(t *testing.T) {
	t.Parallel()
	const opsURL = "https://ops.acme.example/hooks"
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		switch {
		case r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, map[string]any{"operations_url": nil})
		case nth == 2:
			writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
		case nth == 5:
			writeProblem(w, http.StatusUnprocessableEntity, "operations_url: must be an absolute http or https URL")
		case nth == 4:
			writeJSON(w, http.StatusOK, map[string]any{"operations_url": nil})
		default:
			writeJSON(w, http.StatusOK, map[string]any{"operations_url": opsURL})
		}
	})
	c := f.client(t)
	ctx := context.Background()

	s, err := c.Settings(ctx)
	require.NoError(t, err)
	require.Nil(t, s.OperationsURL)

	url := opsURL
	s, err = c.UpdateSettings(ctx, hookwheel.SettingsUpdate{OperationsURL: &url})
	require.NoError(t, err, "a 503 is retried")
	require.Equal(t, opsURL, *s.OperationsURL)

	s, err = c.UpdateSettings(ctx, hookwheel.SettingsUpdate{ClearOperationsURL: true})
	require.NoError(t, err)
	require.Nil(t, s.OperationsURL)

	bad := "ftp://ops.acme.example"
	_, err = c.UpdateSettings(ctx, hookwheel.SettingsUpdate{OperationsURL: &bad})
	require.ErrorIs(t, err, hookwheel.ErrInvalid)
	var apiErr *hookwheel.Error
	require.True(t, errors.As(err, &apiErr))

	_, err = c.UpdateSettings(ctx, hookwheel.SettingsUpdate{OperationsURL: &url, ClearOperationsURL: true})
	require.Error(t, err)

	got := f.got()
	require.Len(t, got, 5, "the conflicting update is not sent")
	require.Equal(t, "/v1/settings", got[0].path)
	for i, want := range map[int]string{1: `{"operations_url":"` + opsURL + `"}`, 2: `{"operations_url":"` + opsURL + `"}`,
		3: `{"operations_url":null}`, 4: `{"operations_url":"ftp://ops.acme.example"}`} {
		require.Equal(t, http.MethodPatch, got[i].method)
		require.Equal(t, "/v1/settings", got[i].path)
		require.JSONEq(t, want, string(got[i].body), "request %d", i)
	}
}

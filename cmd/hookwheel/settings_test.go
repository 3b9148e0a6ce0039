package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientSettings runs the settings command against a live node: shown,
// set, shown as JSON, cleared, and the refusals.
func TestClientSettings(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	const opsURL = "https://ops.acme.example/hookwheel"

	require.Contains(t, w.ok(t, "settings"), "Operations URL: (none")
	out := w.ok(t, "settings", "--operations-url", opsURL)
	require.Contains(t, out, "Updated.")
	require.Contains(t, out, "Operations URL: "+opsURL)
	var s hookwheel.Settings
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "settings", "--json")), &s))
	require.NotNil(t, s.OperationsURL)
	require.Equal(t, opsURL, *s.OperationsURL)

	r := w.run(t, "", []string{"settings", "--operations-url", "ftp://ops.acme.example"})
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "operations_url")
	require.Contains(t, w.ok(t, "settings"), "Operations URL: "+opsURL, "a refused change keeps the URL")

	out = w.ok(t, "settings", "--clear-operations-url")
	require.Contains(t, out, "Operations URL: (none")
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "settings", "--json")), &s))
	require.Nil(t, s.OperationsURL)

	for _, args := range [][]string{
		{"settings", "--operations-url", opsURL, "--clear-operations-url"},
		{"settings", "--operations-url", ""},
		{"settings", "extra"},
	} {
		r := w.run(t, "", args)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
}

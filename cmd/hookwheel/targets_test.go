package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientTargets runs the targets commands against a live node: a
// target paused with a reason, listed, resumed, and the refusals.
func TestClientTargets(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	target := w.receiver.URL

	require.Contains(t, w.ok(t, "targets", "list"), "No paused targets.")
	out := w.ok(t, "targets", "pause", target, "--reason", "moving house")
	require.Contains(t, out, "Paused: the tenant's tasks to this target wait")
	require.Contains(t, out, "moving house")
	require.Contains(t, out, target)
	var paused []hookwheel.TargetPause
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "targets", "list", "--json")), &paused))
	require.Len(t, paused, 1)
	require.Equal(t, target, paused[0].Target)
	require.EqualValues(t, "tenant", paused[0].PausedBy)

	out = w.ok(t, "targets", "resume", target)
	require.Contains(t, out, "Resumed:")
	r := w.run(t, "", []string{"targets", "resume", target})
	require.Equal(t, exitNotFound, r.code, r.stderr)
	r = w.run(t, "", []string{"targets", "pause", target + "/with/a/path"})
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "target")
	for _, args := range [][]string{{"targets"}, {"targets", "frobnicate"}, {"targets", "pause"}} {
		r := w.run(t, "", args)
		require.Equal(t, exitUsage, r.code, r.stderr)
	}
}

// TestTargetDisableAfterEnv: HOOKWHEEL_TARGET_DISABLE_AFTER is a duration
// (unset: the dispatcher's default, 120h); a bad value stops the node.
func TestTargetDisableAfterEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value string
		want  time.Duration
		bad   bool
	}{
		{"", 0, false},
		{"72h", 72 * time.Hour, false},
		{"2s", 2 * time.Second, false},
		{"0", 0, true},
		{"5 days", 0, true},
	} {
		e, err := loadEnv(func(k string) string {
			if k == "HOOKWHEEL_TARGET_DISABLE_AFTER" {
				return tt.value
			}
			return ""
		})
		if tt.bad {
			require.ErrorContains(t, err, "HOOKWHEEL_TARGET_DISABLE_AFTER", "%q", tt.value)
			continue
		}
		require.NoError(t, err, "%q", tt.value)
		require.Equal(t, tt.want, e.targetDisableAfter, "%q", tt.value)
	}
}

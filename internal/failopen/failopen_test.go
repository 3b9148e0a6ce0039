package failopen

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
)

func TestWindow(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	w := New(Config{Skip: 5 * time.Second, Clock: fake})

	require.False(t, w.Skipping(), "a window that never saw a failure")
	w.Failed()
	require.True(t, w.Skipping(), "right after a failure")
	fake.Advance(4999 * time.Millisecond)
	require.True(t, w.Skipping(), "just inside the window")
	fake.Advance(time.Millisecond)
	require.False(t, w.Skipping(), "once the window has passed")

	w.Failed()
	require.True(t, w.Skipping(), "a new failure opens a new window")
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, DefaultSkip, New(Config{}).Skip())
}

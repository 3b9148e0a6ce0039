package tenants

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// TestUnknownKeysBounded: past its size, the oldest id goes first; an id
// remembered again keeps one place; forget drops an id at once.
func TestUnknownKeysBounded(t *testing.T) {
	t.Parallel()
	u := newUnknownKeys(2, time.Minute, clock.NewFake(time.Now()))
	u.remember("a")
	u.remember("b")
	u.remember("b")
	require.True(t, u.known("a"))
	u.remember("c")
	require.False(t, u.known("a"), "the oldest went first")
	require.True(t, u.known("b"))
	require.True(t, u.known("c"))
	require.Len(t, u.until, 2)
	u.forget("c")
	require.False(t, u.known("c"))
}

package store_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// openRedis is storetest.Redis, but also returns the key prefix and a plain
// client to look at the keys the store writes.
func openRedis(t *testing.T) (*store.Redis, string, *redis.Client) {
	t.Helper()
	prefix := storetest.RedisPrefix(t)
	r, err := store.OpenRedis(store.RedisConfig{URL: storetest.RedisURL(), KeyPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, r.Ping(context.Background()))
	opts, err := redis.ParseURL(storetest.RedisURL())
	require.NoError(t, err)
	raw := redis.NewClient(opts)
	t.Cleanup(func() { _ = raw.Close() })
	return r, prefix, raw
}

func keysUnder(t *testing.T, raw *redis.Client, prefix string) []string {
	t.Helper()
	keys, err := raw.Keys(context.Background(), prefix+"*").Result()
	require.NoError(t, err)
	sort.Strings(keys)
	return keys
}

func TestRedisClaimAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	task := uuid.Must(uuid.NewV7())
	holder, other := uuid.New(), uuid.New()
	key := prefix + "{" + task.String() + "}:attempt:1"

	ok, err := r.ClaimAttempt(ctx, task, 1, holder, time.Second)
	require.NoError(t, err)
	require.True(t, ok, "a free claim is taken")
	require.Equal(t, holder.String(), raw.Get(ctx, key).Val())

	// Re-entrant, and the time to live is renewed to the new value.
	ok, err = r.ClaimAttempt(ctx, task, 1, holder, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "the holder claims again")
	ttl := raw.PTTL(ctx, key).Val()
	require.Greater(t, ttl, 50*time.Second)
	require.LessOrEqual(t, ttl, time.Minute)

	ok, err = r.ClaimAttempt(ctx, task, 1, other, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "another token is refused")
	require.Equal(t, holder.String(), raw.Get(ctx, key).Val())
	require.Greater(t, raw.PTTL(ctx, key).Val(), 50*time.Second, "a refused claim does not touch the time to live")

	// Each attempt number is a claim of its own.
	ok, err = r.ClaimAttempt(ctx, task, 2, other, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	// Every key of the task carries its id as the Redis Cluster hash tag: the
	// first '{' of the key, and the text up to the next '}' is the task id.
	keys := keysUnder(t, raw, prefix)
	require.Equal(t, []string{key, prefix + "{" + task.String() + "}:attempt:2"}, keys)
	for _, k := range keys {
		open := strings.IndexByte(k, '{')
		require.Equal(t, len(prefix), open, "no '{' in the prefix: %s", k)
		closing := strings.IndexByte(k[open+1:], '}')
		require.Positive(t, closing)
		require.Equal(t, task.String(), k[open+1:open+1+closing])
	}
}

func TestRedisClaimExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	task := uuid.Must(uuid.NewV7())
	first, second := uuid.New(), uuid.New()
	key := prefix + "{" + task.String() + "}:attempt:3"

	// The claim carries the time to live it was given. Read from a claim of
	// its own that lives a minute: a 50 ms one may be gone before a loaded
	// machine reads it.
	ok, err := r.ClaimAttempt(ctx, task, 4, first, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ttl := raw.PTTL(ctx, prefix+"{"+task.String()+"}:attempt:4").Val()
	require.Greater(t, ttl, 30*time.Second, "the claim carries the time to live it was given")
	require.LessOrEqual(t, ttl, time.Minute)

	ok, err = r.ClaimAttempt(ctx, task, 3, first, 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)

	// Once the time to live runs out, another token takes it.
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err = r.ClaimAttempt(ctx, task, 3, second, time.Minute)
		require.NoError(t, err)
		if ok {
			break
		}
		// Until then the first holder keeps it.
		require.Contains(t, []string{first.String(), ""}, raw.Get(ctx, key).Val())
		select {
		case <-tick.C:
		case <-deadline:
			require.FailNow(t, "the 50ms claim never expired")
		}
	}
	require.Equal(t, second.String(), raw.Get(ctx, key).Val())

	ok, err = r.ClaimAttempt(ctx, task, 3, first, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "the first holder lost it for good")
}

func TestRedisReleaseAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	task := uuid.Must(uuid.NewV7())
	holder, other := uuid.New(), uuid.New()
	key := prefix + "{" + task.String() + "}:attempt:1"

	// Releasing a claim nobody holds is not an error.
	require.NoError(t, r.ReleaseAttempt(ctx, task, 1, holder))
	require.Empty(t, keysUnder(t, raw, prefix))

	ok, err := r.ClaimAttempt(ctx, task, 1, holder, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, r.ReleaseAttempt(ctx, task, 1, other))
	require.Equal(t, holder.String(), raw.Get(ctx, key).Val(), "a non-holder's release leaves the claim")
	ok, err = r.ClaimAttempt(ctx, task, 1, other, time.Minute)
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, r.ReleaseAttempt(ctx, task, 1, holder))
	require.Equal(t, int64(0), raw.Exists(ctx, key).Val(), "the holder's release frees it")
	ok, err = r.ClaimAttempt(ctx, task, 1, other, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "a released claim is free for anyone")
}

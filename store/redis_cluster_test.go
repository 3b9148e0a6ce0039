package store_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// The store on a Redis Cluster and behind Sentinel, each a deployment of the
// test's own (storetest.PrivateRedisCluster, storetest.PrivateRedisSentinel).

// clusterMasters is the set of masters that serve the keys.
func clusterMasters(t *testing.T, cc *redis.ClusterClient, keys []string) []string {
	t.Helper()
	var masters []string
	for _, k := range keys {
		m, err := cc.MasterForKey(context.Background(), k)
		require.NoError(t, err)
		if !slices.Contains(masters, m.Options().Addr) {
			masters = append(masters, m.Options().Addr)
		}
	}
	slices.Sort(masters)
	return masters
}

// attemptClaims is one claim per task, for n tasks: enough that a batch
// reaches every master.
func attemptClaims(n int, token uuid.UUID) []model.AttemptClaim {
	claims := make([]model.AttemptClaim, n)
	for i := range claims {
		claims[i] = model.AttemptClaim{TaskID: uuid.Must(uuid.NewV7()), Attempt: 1, Token: token, TTL: time.Minute}
	}
	return claims
}

func attemptKeys(prefix string, claims []model.AttemptClaim) []string {
	keys := make([]string, len(claims))
	for i, c := range claims {
		keys[i] = prefix + "{" + c.TaskID.String() + "}:attempt:" + strconv.Itoa(c.Attempt)
	}
	return keys
}

func repeat[T any](v T, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// requireClaimCycle takes claims for one token, takes them again, sees
// another token refused, and releases them for the other to take: what the
// dispatcher does with fire-once claims, over batches that span the masters.
func requireClaimCycle(t *testing.T, r *store.Redis, n int) {
	t.Helper()
	ctx := context.Background()
	holder, other := uuid.New(), uuid.New()
	claims := attemptClaims(n, holder)
	held, err := r.ClaimAttempts(ctx, claims)
	require.NoError(t, err)
	require.Equal(t, repeat(true, n), held, "free claims are taken")
	held, err = r.ClaimAttempts(ctx, claims)
	require.NoError(t, err)
	require.Equal(t, repeat(true, n), held, "the holder claims again")

	others := slices.Clone(claims)
	for i := range others {
		others[i].Token = other
	}
	held, err = r.ClaimAttempts(ctx, others)
	require.NoError(t, err)
	require.Equal(t, repeat(false, n), held, "another token is refused")
	require.NoError(t, r.ReleaseAttempts(ctx, others))
	held, err = r.ClaimAttempts(ctx, others)
	require.NoError(t, err)
	require.Equal(t, repeat(false, n), held, "a non-holder's release leaves the claims")

	require.NoError(t, r.ReleaseAttempts(ctx, claims))
	held, err = r.ClaimAttempts(ctx, others)
	require.NoError(t, err)
	require.Equal(t, repeat(true, n), held, "released claims are free for anyone")
	require.NoError(t, r.ReleaseAttempts(ctx, others))
}

// TestRedisCluster runs the fire-once claims, both limiters and the NOSCRIPT
// recovery on a Redis Cluster of three masters, and sees the store go on
// after a master is killed. The steps share one cluster and run in turn.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := storetest.PrivateRedisCluster(t)
	prefix := "hookwheel:"
	r, err := store.OpenRedis(store.RedisConfig{URL: cluster.URL(), KeyPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, store.RedisCluster, r.Mode())
	require.NoError(t, r.Ping(ctx))
	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = raw.Close() })
	masters := cluster.Masters()
	require.Len(t, masters, 3)

	// The slots the tests compute (store.ClusterSlot, and with it
	// TestScriptKeysShareASlot) are the server's: known keys, and what every
	// key builder gives, asked of the cluster with CLUSTER KEYSLOT.
	t.Run("key slots", func(t *testing.T) {
		for key, slot := range store.KnownSlots() {
			got, err := raw.ClusterKeySlot(ctx, key).Result()
			require.NoError(t, err, "CLUSTER KEYSLOT %q", key)
			require.EqualValues(t, slot, got, "slot of %q", key)
		}
		for _, prefix := range []string{prefix, "", "hwtest:0123abcd:"} {
			pr, err := store.OpenRedis(store.RedisConfig{URL: cluster.URL(), KeyPrefix: prefix})
			require.NoError(t, err)
			for _, host := range []string{"example.com", "[::1]", "xn--bcher-kva.example"} {
				for _, group := range pr.ScriptKeys(uuid.New(), uuid.Must(uuid.NewV7()), host) {
					want, err := raw.ClusterKeySlot(ctx, group[0]).Result()
					require.NoError(t, err, "CLUSTER KEYSLOT %q", group[0])
					for _, key := range group {
						got, err := raw.ClusterKeySlot(ctx, key).Result()
						require.NoError(t, err, "CLUSTER KEYSLOT %q", key)
						require.Equal(t, want, got, "keys one script touches share a slot: %v", group)
						require.EqualValues(t, got, store.ClusterSlot(key), "slot of %q", key)
					}
				}
			}
			require.NoError(t, pr.Close())
		}
	})

	t.Run("claims", func(t *testing.T) {
		probe := attemptClaims(30, uuid.New())
		require.Equal(t, masters, clusterMasters(t, raw, attemptKeys(prefix, probe)), "30 tasks span every master")
		requireClaimCycle(t, r, 30)

		// One claim at a time too (the script run alone, not pipelined).
		task, holder := uuid.Must(uuid.NewV7()), uuid.New()
		ok, err := r.ClaimAttempt(ctx, task, 1, holder, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = r.ClaimAttempt(ctx, task, 1, uuid.New(), time.Minute)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, r.ReleaseAttempt(ctx, task, 1, holder))
		require.Zero(t, raw.Exists(ctx, prefix+"{"+task.String()+"}:attempt:1").Val())
	})

	t.Run("api rate", func(t *testing.T) {
		for range 10 {
			tenant := uuid.New()
			for i := range 3 {
				d, err := r.AllowAPIRequest(ctx, tenant, 1, 3)
				require.NoError(t, err)
				require.True(t, d.Allowed, "request %d of a burst of 3", i+1)
			}
			d, err := r.AllowAPIRequest(ctx, tenant, 1, 3)
			require.NoError(t, err)
			require.False(t, d.Allowed, "the fourth exceeds the burst")
			require.Positive(t, d.RetryAfter)
		}
	})

	t.Run("dispatch admission", func(t *testing.T) {
		at := time.Now()
		var reqs []model.DispatchRequest
		var rateKeys []string
		for i := range 20 {
			limit := model.DispatchLimit{TenantID: uuid.New(), Host: fmt.Sprintf("h%d.example", i), Rate: 1, Concurrency: 2}
			rateKeys = append(rateKeys, prefix+"{"+limit.TenantID.String()+"/"+limit.Host+"}:dispatch_rate")
			for range 3 {
				reqs = append(reqs, model.DispatchRequest{Limit: limit, TaskID: uuid.New(), Token: uuid.New(), Lease: time.Minute, At: at})
			}
		}
		require.Equal(t, masters, clusterMasters(t, raw, rateKeys), "20 limits span every master")
		got, err := r.AdmitDispatches(ctx, reqs)
		require.NoError(t, err)
		for i, a := range got {
			switch i % 3 {
			case 0:
				require.Equal(t, model.DispatchNow, a.Outcome, "the first of a limit goes now")
			default:
				// The rate books the next slots, one second apart.
				require.Equal(t, model.DispatchLater, a.Outcome, "request %d", i)
				require.Equal(t, time.Duration(i%3)*time.Second, a.Wait, "request %d", i)
			}
		}
		// Concurrency: the two slots of a limit with no rate.
		var busy []model.DispatchRequest
		for i := range 20 {
			limit := model.DispatchLimit{TenantID: uuid.New(), Host: fmt.Sprintf("c%d.example", i), Concurrency: 2}
			for range 3 {
				busy = append(busy, model.DispatchRequest{Limit: limit, TaskID: uuid.New(), Token: uuid.New(), Lease: time.Minute, At: at})
			}
		}
		got, err = r.AdmitDispatches(ctx, busy)
		require.NoError(t, err)
		for i, a := range got {
			want := model.DispatchNow
			if i%3 == 2 {
				want = model.DispatchBusy
			}
			require.Equal(t, want, a.Outcome, "request %d", i)
		}
		for i := 0; i < len(busy); i += 3 {
			q := busy[i]
			require.NoError(t, r.ReleaseDispatch(ctx, q.Limit, q.TaskID, q.Token))
			a, err := r.AdmitDispatch(ctx, busy[i+2])
			require.NoError(t, err)
			require.Equal(t, model.DispatchNow, a.Outcome, "a released slot is free")
		}
	})

	// One master forgets its scripts (a restart, SCRIPT FLUSH) while the
	// others know them: a batch over every master must run each command
	// once. Sending the whole pipeline again would book a second rate slot
	// on the masters that had run theirs.
	t.Run("NOSCRIPT on one master", func(t *testing.T) {
		at := time.Now()
		var reqs []model.DispatchRequest
		var rateKeys []string
		for i := range 30 {
			limit := model.DispatchLimit{TenantID: uuid.New(), Host: fmt.Sprintf("noscript%d.example", i), Rate: 1}
			rateKeys = append(rateKeys, prefix+"{"+limit.TenantID.String()+"/"+limit.Host+"}:dispatch_rate")
			reqs = append(reqs, model.DispatchRequest{Limit: limit, TaskID: uuid.New(), Token: uuid.New(), Lease: time.Minute, At: at})
		}
		require.Equal(t, masters, clusterMasters(t, raw, rateKeys))
		claims := attemptClaims(30, uuid.New())
		require.Equal(t, masters, clusterMasters(t, raw, attemptKeys(prefix, claims)))

		// Every master knows both scripts (the steps above ran them), then
		// one forgets them.
		for _, m := range masters {
			requireScriptsKnown(t, m, true, "claim_attempt", "dispatch_admit")
		}
		flushed := redis.NewClient(&redis.Options{Addr: masters[0]})
		defer flushed.Close()
		require.NoError(t, flushed.ScriptFlush(ctx).Err())
		requireScriptsKnown(t, masters[0], false, "claim_attempt", "dispatch_admit")
		requireScriptsKnown(t, masters[1], true, "claim_attempt", "dispatch_admit")

		got, err := r.AdmitDispatches(ctx, reqs)
		require.NoError(t, err)
		for i, a := range got {
			require.Equal(t, model.DispatchNow, a.Outcome, "admission %d ran once", i)
			next, err := raw.Get(ctx, rateKeys[i]).Int64()
			require.NoError(t, err)
			require.Equal(t, at.UnixMicro()+1_000_000, next, "one slot booked on %s", rateKeys[i])
		}
		requireScriptsKnown(t, masters[0], true, "dispatch_admit")

		require.NoError(t, flushed.ScriptFlush(ctx).Err())
		held, err := r.ClaimAttempts(ctx, claims)
		require.NoError(t, err)
		require.Equal(t, repeat(true, len(claims)), held)
		require.NoError(t, flushed.ScriptFlush(ctx).Err())
		require.NoError(t, r.ReleaseAttempts(ctx, claims))
		for _, k := range attemptKeys(prefix, claims) {
			require.Zero(t, raw.Exists(ctx, k).Val(), "released: %s", k)
		}
	})

	// Ping asks every master, so one master not answering fails it, and the
	// error names that master. CLIENT PAUSE holds the master's clients (and
	// cannot be lifted early: CLIENT UNPAUSE waits too) but not the cluster
	// bus, so the cluster does not fail over meanwhile. The URL's own read
	// timeout, which the store keeps, makes the unanswered PING fail well
	// within the pause.
	t.Run("ping every master", func(t *testing.T) {
		short, err := store.OpenRedis(store.RedisConfig{URL: cluster.URL() + "&read_timeout=300ms", KeyPrefix: prefix})
		require.NoError(t, err)
		defer short.Close()
		require.NoError(t, short.Ping(ctx))
		paused := redis.NewClient(&redis.Options{Addr: masters[2]})
		defer paused.Close()
		const pause = 5 * time.Second
		require.NoError(t, paused.Do(ctx, "client", "pause", pause.Milliseconds(), "all").Err())
		pausedAt := time.Now()
		err = short.Ping(ctx)
		require.Less(t, time.Since(pausedAt), pause, "the ping returned after the pause ended: it proves nothing")
		require.ErrorContains(t, err, "master "+masters[2])
		pollUntil(t, pause+10*time.Second, "every master answers once the pause ends", func() error { return short.Ping(ctx) })
	})

	// Last: it leaves a master dead. The store, through the same client,
	// finds the promoted replica by itself.
	t.Run("master killed", func(t *testing.T) {
		promoted := cluster.KillMaster(masters[1])
		require.NotEmpty(t, promoted)
		after := cluster.Masters()
		require.Len(t, after, 3)
		require.NotContains(t, after, masters[1])
		require.Contains(t, after, promoted)
		pollUntil(t, 30*time.Second, "claims work after the failover", func() error {
			_, err := r.ClaimAttempts(ctx, attemptClaims(30, uuid.New()))
			return err
		})
		requireClaimCycle(t, r, 30)
	})
}

// pollUntil calls f every 20 ms until it succeeds, failing the test with its
// last error after within.
func pollUntil(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: not within %s: %v", what, within, err)
		<-tick.C
	}
}

// scriptSHA1 is the SHA-1 EVALSHA names lua/<name>.lua by.
func scriptSHA1(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("lua", name+".lua"))
	require.NoError(t, err)
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// requireScriptsKnown checks whether the server at addr has the scripts
// cached.
func requireScriptsKnown(t *testing.T, addr string, known bool, names ...string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var shas []string
	for _, name := range names {
		shas = append(shas, scriptSHA1(t, name))
	}
	exists, err := c.ScriptExists(context.Background(), shas...).Result()
	require.NoError(t, err)
	require.Equal(t, repeat(known, len(names)), exists, "scripts %v cached on %s", names, addr)
}

// TestRedisSentinel: the fire-once claims through Sentinel, across a
// failover: a claim taken before the master died still holds on the new one.
func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sentinel := storetest.PrivateRedisSentinel(t)
	prefix := "hookwheel:"
	r, err := store.OpenRedis(store.RedisConfig{URL: sentinel.URL(), KeyPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, store.RedisSentinel, r.Mode())
	require.NoError(t, r.Ping(ctx))

	requireClaimCycle(t, r, 10)
	d, err := r.AllowAPIRequest(ctx, uuid.New(), 1, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)

	task, holder := uuid.Must(uuid.NewV7()), uuid.New()
	ok, err := r.ClaimAttempt(ctx, task, 1, holder, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	// Replication is asynchronous: wait for the replica to have the claim.
	oldMaster := sentinel.Master()
	replica := sentinel.Replica()
	rc := redis.NewClient(&redis.Options{Addr: replica})
	defer rc.Close()
	key := prefix + "{" + task.String() + "}:attempt:1"
	pollUntil(t, 10*time.Second, "the replica has the claim", func() error {
		if v := rc.Get(ctx, key).Val(); v != holder.String() {
			return fmt.Errorf("replica holds %q", v)
		}
		return nil
	})

	promoted := sentinel.KillMaster()
	require.Equal(t, replica, promoted)
	require.NotEqual(t, oldMaster, sentinel.Master())
	pollUntil(t, 30*time.Second, "claims work after the failover", func() error {
		ok, err = r.ClaimAttempt(ctx, task, 1, uuid.New(), time.Minute)
		return err
	})
	require.False(t, ok, "the claim taken before the failover holds on the new master")
	require.NoError(t, r.ReleaseAttempt(ctx, task, 1, holder))
	requireClaimCycle(t, r, 10)
}

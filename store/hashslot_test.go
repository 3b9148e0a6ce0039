package store

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// clusterSlot is the Redis Cluster hash slot of a key, per the cluster
// specification: CRC16 (XMODEM) of the hash tag, the text between the first
// '{' and the next '}' when that is not empty, else of the whole key, modulo
// 16384. go-redis keeps its own copy internal, so the test has this one.
func clusterSlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// ClusterSlot is clusterSlot, for the tests of package store_test, which
// compare it with what a live Redis Cluster answers to CLUSTER KEYSLOT.
var ClusterSlot = clusterSlot

// ScriptKeys is what every key builder gives for one tenant, task and host,
// grouped by the keys one script call touches together (claim_attempt and
// release_attempt: one attempt key each, but the attempts of a task are
// grouped since they share its tag; gcra; dispatch_admit and
// ReleaseDispatch), for the tests of package store_test to ask a live Redis
// Cluster where they hash.
func (r *Redis) ScriptKeys(tenant, task uuid.UUID, host string) [][]string {
	return [][]string{
		{r.attemptKey(task, 1), r.attemptKey(task, 2)},
		{r.apiRateKey(tenant)},
		r.dispatchKeys(model.DispatchLimit{TenantID: tenant, Host: host}, task, 1),
		r.dispatchKeys(model.DispatchLimit{TenantID: tenant, Flow: "customer-1042", Rate: 100}, task, 1),
	}
}

// knownSlots are keys and their slots: the cluster specification's CRC16
// check value (0x31C3) and hash tag examples, the CLUSTER KEYSLOT
// documentation's, and a few plain keys, as a Redis server answers them.
var knownSlots = []struct {
	key  string
	slot int
}{
	{"123456789", 0x31C3},
	{"somekey", 11058},
	{"foo{hash_tag}", 2515},
	{"foo", 12182},
	{"bar", 5061},
	{"{user1000}.following", 3443},
	{"foo{bar}{zap}", 5061}, // the first tag only: "bar"
	{"foo{}{bar}", 8363},    // an empty tag hashes the whole key
	{"foo{{bar}}zap", 4015}, // the tag is "{bar"
	{"", 0},
}

// KnownSlots is knownSlots, for the tests of package store_test to ask a
// live cluster too.
func KnownSlots() map[string]int {
	m := make(map[string]int, len(knownSlots))
	for _, k := range knownSlots {
		m[k.key] = k.slot
	}
	return m
}

func TestClusterSlotFunction(t *testing.T) {
	t.Parallel()
	for _, k := range knownSlots {
		require.Equal(t, k.slot, clusterSlot(k.key), "slot of %q", k.key)
	}
	require.Equal(t, clusterSlot("user1000"), clusterSlot("{user1000}.followers"))
	require.Equal(t, clusterSlot("{bar"), clusterSlot("foo{{bar}}zap"))
	require.NotEqual(t, clusterSlot("bar"), clusterSlot("foo{}{bar}"))
}

// TestScriptKeysShareASlot: every script's KEYS share one hash slot, whatever
// the prefix, tenant, task or host, so that a Redis Cluster runs each script
// on one master (it refuses keys of several slots with CROSSSLOT).
func TestScriptKeysShareASlot(t *testing.T) {
	t.Parallel()
	hosts := []string{"example.com", "a", "xn--bcher-kva.example", "10.0.0.1", "[::1]", "very-long-" + strings.Repeat("sub.", 40) + "example"}
	for _, prefix := range []string{"hookwheel:", "", "hwtest:0123abcd:", "a:b:c:"} {
		r := &Redis{prefix: prefix}
		for range 50 {
			tenant, task := uuid.New(), uuid.Must(uuid.NewV7())

			// claim_attempt.lua and release_attempt.lua: one key, but the
			// tag is what keeps a task's attempts together.
			first, second := r.attemptKey(task, 1), r.attemptKey(task, 2)
			require.Equal(t, clusterSlot(first), clusterSlot(second), "attempt keys %s, %s", first, second)
			require.Equal(t, clusterSlot(task.String()), clusterSlot(first), "the task id is the tag: %s", first)

			// gcra.lua.
			require.Equal(t, clusterSlot(tenant.String()), clusterSlot(r.apiRateKey(tenant)), "the tenant id is the tag: %s", r.apiRateKey(tenant))

			// dispatch_admit.lua: three keys, and ReleaseDispatch's third.
			for _, host := range hosts {
				keys := r.dispatchKeys(model.DispatchLimit{TenantID: tenant, Host: host}, task, 1)
				require.Len(t, keys, 3)
				for _, k := range keys[1:] {
					require.Equal(t, clusterSlot(keys[0]), clusterSlot(k), "dispatch keys %v", keys)
				}
			}
			// The same script under a flow key; a key is free text within
			// tasks.FlowKeyProblem's set, so the longest and oddest of it.
			for _, flow := range flowKeys {
				keys := r.dispatchKeys(model.DispatchLimit{TenantID: tenant, Flow: flow, Rate: 0.5}, task, 3)
				require.Len(t, keys, 3)
				for _, k := range keys[1:] {
					require.Equal(t, clusterSlot(keys[0]), clusterSlot(k), "flow dispatch keys %v", keys)
				}
				require.NotEqual(t, r.dispatchKeys(model.DispatchLimit{TenantID: tenant, Host: flow, Rate: 0.5}, task, 3)[0], keys[0],
					"a flow key's limiter is apart from a host of the same name")
			}
		}
	}
}

// flowKeys are flow keys the rules allow (tasks.FlowKeyProblem), odd ones
// included.
var flowKeys = []string{"a", "customer-1042", "user@example.com", "a:b=c+d", "..", strings.Repeat("k", 255)}

func TestRedisKeyPrefixRefusesBraces(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"{hookwheel}:", "hook{wheel:", "hookwheel}:", "a{}:"} {
		err := CheckRedisKeyPrefix(prefix)
		require.Error(t, err, prefix)
		require.Contains(t, err.Error(), "hash tag")
		_, err = OpenRedis(RedisConfig{URL: "redis://127.0.0.1:6379/0", KeyPrefix: prefix})
		require.Error(t, err, prefix)
	}
	require.NoError(t, CheckRedisKeyPrefix("hookwheel:prod:"))
}

func TestNewRedisClientModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		mode RedisMode
	}{
		{"redis://127.0.0.1:6379/0", RedisSingle},
		{"rediss://user:secret@redis.example:6380/2", RedisSingle},
		{"redis://127.0.0.1:6379", RedisSingle},
		{"redis://10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000", RedisCluster},
		{"redis://10.0.0.1:7000/0?addr=10.0.0.2:7000", RedisCluster},
		{"rediss://user:secret@10.0.0.1:7000?addr=10.0.0.2:7000", RedisCluster},
		// A cluster behind one configuration endpoint: the address twice.
		{"rediss://clustercfg.example.cache.amazonaws.com:6379?addr=clustercfg.example.cache.amazonaws.com:6379", RedisCluster},
		{"redis://10.0.0.1:26379/0?master_name=mymaster&addr=10.0.0.2:26379&addr=10.0.0.3:26379", RedisSentinel},
		{"redis://s:sentinelpw@10.0.0.1:26379/3?master_name=mymaster&password=masterpw", RedisSentinel},
	} {
		client, mode, err := NewRedisClient(tc.url)
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.mode, mode, tc.url)
		require.NoError(t, client.Close())
	}
	for _, tc := range []struct{ url, want string }{
		{"redis://10.0.0.1:7000/3?addr=10.0.0.2:7000", "database 0 only"},
		{"redis://10.0.0.1:7000?addr=nonsense", "addr"},
		{"redis://10.0.0.1:26379?master_name=", "master_name is empty"},
		{"redis://10.0.0.1:26379?master_name=m&addr=10.0.0.2", "addr"},
		{"redis://10.0.0.1:6379/0?bogus=1", "bogus"},
		{"http://10.0.0.1:6379/0", "scheme"},
		{"redis://u:pw@[::1:6379/0", "not a URL"},
	} {
		_, _, err := NewRedisClient(tc.url)
		require.Error(t, err, tc.url)
		require.Contains(t, err.Error(), tc.want, tc.url)
		require.NotContains(t, err.Error(), "pw", "the error leaks the password")
	}
}

// TestNewRedisClientTimeouts: the fail-fast timeouts apply when the URL sets
// none, and a timeout the URL sets is kept, in every mode.
func TestNewRedisClientTimeouts(t *testing.T) {
	t.Parallel()
	timeouts := func(t *testing.T, client redis.UniversalClient) (dial, read, write time.Duration) {
		t.Helper()
		switch c := client.(type) {
		case *redis.Client: // one server, and the Sentinel failover client
			o := c.Options()
			return o.DialTimeout, o.ReadTimeout, o.WriteTimeout
		case *redis.ClusterClient:
			o := c.Options()
			return o.DialTimeout, o.ReadTimeout, o.WriteTimeout
		}
		t.Fatalf("client of type %T", client)
		return 0, 0, 0
	}
	for mode, base := range map[RedisMode]string{
		RedisSingle:   "redis://127.0.0.1:6379/0?",
		RedisCluster:  "redis://10.0.0.1:7000?addr=10.0.0.2:7000&",
		RedisSentinel: "redis://10.0.0.1:26379/0?master_name=m&",
	} {
		for _, tc := range []struct {
			query             string
			dial, read, write time.Duration
		}{
			{"", redisDialTimeout, redisReadTimeout, redisReadTimeout},
			{"dial_timeout=5s&read_timeout=3s&write_timeout=4s", 5 * time.Second, 3 * time.Second, 4 * time.Second},
			// go-redis reads a bare number as seconds; an unset write
			// timeout follows the read timeout.
			{"dial_timeout=7&read_timeout=1500ms", 7 * time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond},
			{"write_timeout=250ms", redisDialTimeout, redisReadTimeout, 250 * time.Millisecond},
			// 0 turns the read (and so the write) timeout off.
			{"read_timeout=0", redisDialTimeout, 0, 0},
		} {
			url := base + tc.query
			client, got, err := NewRedisClient(url)
			require.NoError(t, err, url)
			require.Equal(t, mode, got, url)
			dial, read, write := timeouts(t, client)
			require.Equal(t, []time.Duration{tc.dial, tc.read, tc.write}, []time.Duration{dial, read, write}, "dial, read and write timeouts of %s", url)
			require.NoError(t, client.Close())
		}
		for _, q := range []string{"dial_timeout=0", "dial_timeout=-1s"} {
			_, _, err := NewRedisClient(base + q)
			require.ErrorContains(t, err, "dial_timeout must be positive", base+q)
		}
	}
}

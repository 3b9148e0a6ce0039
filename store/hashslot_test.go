package store

import (
	"strings"
	"testing"

	"github.com/google/uuid"
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

func TestClusterSlotFunction(t *testing.T) {
	t.Parallel()
	// The specification's check value, and its hash tag examples.
	require.Equal(t, 0x31C3, clusterSlot("123456789"))
	require.Equal(t, clusterSlot("user1000"), clusterSlot("{user1000}.following"))
	require.Equal(t, clusterSlot("user1000"), clusterSlot("foo{user1000}{zap}"))
	require.Equal(t, clusterSlot("foo{}{bar}"), clusterSlot("foo{}{bar}"), "an empty tag hashes the whole key")
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
				keys := r.dispatchKeys(DispatchLimit{TenantID: tenant, Host: host}, task)
				require.Len(t, keys, 3)
				for _, k := range keys[1:] {
					require.Equal(t, clusterSlot(keys[0]), clusterSlot(k), "dispatch keys %v", keys)
				}
			}
		}
	}
}

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

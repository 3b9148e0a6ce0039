package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The deployments hookwheel must survive beside a single Redis: a Redis
// Cluster and a master watched by Sentinels, each made of redis-server
// processes of this test's own (PrivateService), on free ports of 127.0.0.1,
// keeping nothing on disk. Their timeouts are short (a node is judged down
// after a second) so that a test can kill a master and see the failover in a
// few seconds.

// redisServerPath is Debian's redis-server, which also runs Sentinel.
func redisServerPath(t testing.TB) string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("storetest: redis-server not found on PATH: these tests need the Redis server binaries; " +
			"run `make test` (deploy/dev/services.sh installs them), or install the redis-server package")
	}
	return server
}

// privateRedisNode is a PrivateService running redis-server in a directory
// of its own with the options every throwaway Redis gets, then extra(port).
func privateRedisNode(t testing.TB, name string, argv0 []string, extra func(port int) []string) *PrivateService {
	t.Helper()
	dir := t.TempDir()
	s := &PrivateService{
		t:    t,
		name: name,
		dir:  dir,
		urlFor: func(port int) string {
			return fmt.Sprintf("redis://127.0.0.1:%d/0", port)
		},
		command: func(port int) []string {
			argv := append(slices.Clone(argv0), "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
				"--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--dir", dir, "--logfile", "")
			return append(argv, extra(port)...)
		},
		ping: func(ctx context.Context, url string) error {
			opts, err := redis.ParseURL(url)
			if err != nil {
				return err
			}
			opts.MaxRetries = -1
			client := redis.NewClient(opts)
			defer client.Close()
			return client.Ping(ctx).Err()
		},
		stopSignal:  syscall.SIGTERM,
		deathSignal: syscall.SIGKILL,
		logs:        newTailBuffer(32 << 10),
	}
	s.firstStart()
	return s
}

// addr is host:port of a private service.
func (s *PrivateService) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// nodeClient is a plain client of one server, which gives up at once when it
// is down.
func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
}

// await polls cond until it returns nil, failing the test with cond's last
// error after within.
func await(t testing.TB, within time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("storetest: %s: not within %s: %v", what, within, err)
		}
		<-tick.C
	}
}

// RedisCluster is a Redis Cluster of one test's own: three masters
// sharing the 16384 slots evenly, each with one replica. Its methods fail the
// test on error, so call them from the test's goroutine.
type RedisCluster struct {
	t     testing.TB
	nodes []*PrivateService // the masters first, then their replicas in the same order
}

// clusterNodeTimeout is how long a node may go unanswered before the others
// judge it down; a replica takes its master's place a second or two later.
const clusterNodeTimeout = 1000 * time.Millisecond

// PrivateRedisCluster starts six redis-server processes in cluster mode and
// joins them into a Redis Cluster (slots assigned, nodes met, replicas
// attached, through CLUSTER commands rather than redis-cli so that nothing
// waits on its fixed pauses), and returns once every node reports
// cluster_state:ok and every replica is in sync. It stops when the test ends.
func PrivateRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	server := redisServerPath(t)
	c := &RedisCluster{t: t}
	buses := make([]int, 6)
	for i := range buses {
		role := "master"
		if i >= 3 {
			role = "replica"
		}
		c.nodes = append(c.nodes, privateRedisNode(t, fmt.Sprintf("redis cluster node %d (%s)", i, role), []string{server},
			func(port int) []string {
				// The bus port is the client port + 10000 unless set, which is
				// past 65535 for much of the ephemeral range. Every start
				// picks a new one: firstStart starts again, on a new client
				// port, when a port was taken, and the taken one may have
				// been the bus port. Nothing starts a cluster node a second
				// time once it has joined (KillMaster does not restart), so
				// the port CLUSTER MEET names below is the one it listens on.
				buses[i] = freePort(t)
				for buses[i] == port {
					buses[i] = freePort(t)
				}
				return []string{
					"--cluster-enabled", "yes",
					"--cluster-config-file", "nodes.conf",
					"--cluster-port", strconv.Itoa(buses[i]),
					"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
					// A replica fails over however long ago it last heard its
					// master, and never moves to another master.
					"--cluster-replica-validity-factor", "0",
					"--cluster-allow-replica-migration", "no",
					// Replicas sync at once, over the socket.
					"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
				}
			}))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = nodeClient(n.addr())
		defer clients[i].Close()
	}
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("storetest: form redis cluster: %s: %v", what, err)
		}
	}
	ids := make([]string, len(c.nodes))
	for i, client := range clients {
		id, err := client.ClusterMyID(ctx).Result()
		must(err, "CLUSTER MYID")
		ids[i] = id
	}
	const slots = 16384
	for i := range 3 {
		// Distinct epochs, as redis-cli gives them, so that no two masters
		// start out claiming the same configuration.
		must(clients[i].Do(ctx, "cluster", "set-config-epoch", i+1).Err(), "CLUSTER SET-CONFIG-EPOCH")
		must(clients[i].Do(ctx, "cluster", "addslotsrange", i*slots/3, (i+1)*slots/3-1).Err(), "CLUSTER ADDSLOTSRANGE")
	}
	for i := 1; i < len(c.nodes); i++ {
		must(clients[0].Do(ctx, "cluster", "meet", "127.0.0.1", c.nodes[i].port, buses[i]).Err(), "CLUSTER MEET")
	}
	await(t, 20*time.Second, "redis cluster nodes meet", func(ctx context.Context) error {
		for i, client := range clients {
			nodes, err := clusterNodes(ctx, client)
			if err != nil {
				return err
			}
			if len(nodes) != len(c.nodes) {
				return fmt.Errorf("node %d knows %d nodes", i, len(nodes))
			}
			for _, n := range nodes {
				if n.has("handshake") || n.has("noaddr") {
					return fmt.Errorf("node %d: %s is %v", i, n.addr, n.flags)
				}
			}
		}
		return nil
	})
	for i := 3; i < len(c.nodes); i++ {
		must(clients[i].ClusterReplicate(ctx, ids[i-3]).Err(), "CLUSTER REPLICATE")
	}
	await(t, 20*time.Second, "redis cluster ready", func(ctx context.Context) error {
		for i := range c.nodes {
			if err := c.nodeReady(ctx, clients[i], i >= 3); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
		}
		return nil
	})
	return c
}

// nodeReady checks what one node of a healthy cluster says: the cluster is
// ok, it sees three masters serving slots and three replicas, and, for a
// replica, its link to its master is up.
func (c *RedisCluster) nodeReady(ctx context.Context, client *redis.Client, replica bool) error {
	info, err := client.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	nodes, err := clusterNodes(ctx, client)
	if err != nil {
		return err
	}
	masters, replicas := 0, 0
	for _, n := range nodes {
		switch {
		case n.has("fail") || n.has("fail?"):
		case n.has("master") && len(n.slots) > 0:
			masters++
		case n.has("slave"):
			replicas++
		}
	}
	if masters != 3 || replicas != 3 {
		return fmt.Errorf("sees %d masters with slots and %d replicas", masters, replicas)
	}
	if replica {
		repl, err := client.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "master_link_status:up") {
			return errors.New("replica not in sync with its master")
		}
	}
	return nil
}

// URL is the cluster in the form REDIS_URL takes for a Redis Cluster, every
// node a seed: redis://host1:port1?addr=host2:port2&addr=....
func (c *RedisCluster) URL() string {
	addrs := c.Addrs()
	q := make([]string, 0, len(addrs)-1)
	for _, a := range addrs[1:] {
		q = append(q, "addr="+a)
	}
	return "redis://" + addrs[0] + "?" + strings.Join(q, "&")
}

// Addrs are the host:port of every node, killed ones included.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr()
	}
	return addrs
}

// live is a node that runs, for asking the cluster what it looks like.
func (c *RedisCluster) live() *PrivateService {
	for _, n := range c.nodes {
		if n.Running() {
			return n
		}
	}
	c.t.Fatalf("storetest: every node of the redis cluster is down")
	return nil
}

// Masters are the host:port of the masters serving slots now.
func (c *RedisCluster) Masters() []string {
	c.t.Helper()
	client := nodeClient(c.live().addr())
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := clusterNodes(ctx, client)
	if err != nil {
		c.t.Fatalf("storetest: redis cluster nodes: %v", err)
	}
	var masters []string
	for _, n := range nodes {
		if n.has("master") && !n.has("fail") && len(n.slots) > 0 {
			masters = append(masters, n.addr)
		}
	}
	slices.Sort(masters)
	return masters
}

// KillMaster ends the master at addr with SIGKILL and waits until its
// replica has taken its slots and every live node says cluster_state:ok. It
// returns the address of the promoted replica. A master without a replica
// (one that already took a killed master's place) cannot be killed this way.
func (c *RedisCluster) KillMaster(addr string) string {
	c.t.Helper()
	var victim *PrivateService
	for _, n := range c.nodes {
		if n.addr() == addr && n.Running() {
			victim = n
		}
	}
	if victim == nil {
		c.t.Fatalf("storetest: kill redis cluster master %s: no such live node", addr)
	}
	client := nodeClient(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var replica string
	id, err := client.ClusterMyID(ctx).Result()
	if err == nil {
		var nodes []clusterNode
		if nodes, err = clusterNodes(ctx, client); err == nil {
			for _, n := range nodes {
				if n.has("slave") && n.master == id && !n.has("fail") {
					replica = n.id
				}
			}
			if replica == "" {
				err = fmt.Errorf("%s is not a master with a live replica", addr)
			}
		}
	}
	_ = client.Close()
	if err != nil {
		c.t.Fatalf("storetest: kill redis cluster master %s: %v", addr, err)
	}

	victim.Kill()
	var promoted string
	await(c.t, 30*time.Second, "redis cluster failover of "+addr, func(ctx context.Context) error {
		for _, n := range c.nodes {
			if !n.Running() {
				continue
			}
			client := nodeClient(n.addr())
			err := func() error {
				defer client.Close()
				info, err := client.ClusterInfo(ctx).Result()
				if err != nil {
					return err
				}
				if !strings.Contains(info, "cluster_state:ok") {
					return fmt.Errorf("%s: cluster_state is not ok", n.addr())
				}
				nodes, err := clusterNodes(ctx, client)
				if err != nil {
					return err
				}
				took := false
				for _, node := range nodes {
					if node.id == id && len(node.slots) > 0 {
						return fmt.Errorf("%s: the killed master still serves slots", n.addr())
					}
					if node.id == replica && node.has("master") && len(node.slots) > 0 {
						took, promoted = true, node.addr
					}
				}
				if !took {
					return fmt.Errorf("%s: the replica has not taken the slots yet", n.addr())
				}
				return nil
			}()
			if err != nil {
				return err
			}
		}
		return nil
	})
	return promoted
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id     string
	addr   string // host:port for clients
	flags  []string
	master string // the master's id for a replica, else "-"
	slots  []string
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

// clusterNodes parses CLUSTER NODES: <id> <ip:port@cport[,hostname]>
// <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state>
// <slot>...
func clusterNodes(ctx context.Context, client *redis.Client) ([]clusterNode, error) {
	out, err := client.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var nodes []clusterNode
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], slots: f[8:]})
	}
	return nodes, nil
}

// RedisSentinel is a Redis master with one replica, watched by three
// Sentinels (quorum 2), of one test's own. Its methods fail the test on
// error, so call them from the test's goroutine.
type RedisSentinel struct {
	t         testing.TB
	master    *PrivateService
	replica   *PrivateService
	sentinels []*PrivateService
}

// SentinelMasterName is the name the Sentinels know the master by.
const SentinelMasterName = "hookwheel"

// PrivateRedisSentinel starts the master, its replica and three Sentinels
// that judge a master down after a second, and returns once the replica is
// in sync and every Sentinel knows the replica and the two other Sentinels
// (what a failover needs). It stops when the test ends.
func PrivateRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	server := redisServerPath(t)
	s := &RedisSentinel{t: t}
	fastSync := func(int) []string { return []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"} }
	s.master = privateRedisNode(t, "redis sentinel master", []string{server}, fastSync)
	s.replica = privateRedisNode(t, "redis sentinel replica", []string{server}, func(port int) []string {
		return append(fastSync(port), "--replicaof", "127.0.0.1", strconv.Itoa(s.master.port))
	})
	await(t, 20*time.Second, "redis replica in sync", func(ctx context.Context) error {
		client := nodeClient(s.replica.addr())
		defer client.Close()
		repl, err := client.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "master_link_status:up") {
			return errors.New("replica not in sync with its master")
		}
		return nil
	})
	for i := range 3 {
		// Sentinel rewrites its configuration file as it learns, so each
		// has a file of its own, written before it starts.
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		lines := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n", SentinelMasterName, s.master.port) +
			fmt.Sprintf("sentinel down-after-milliseconds %s 1000\n", SentinelMasterName) +
			// Twice this is the pause before another try when a vote was
			// split: short, so that a split vote on a loaded machine costs a
			// test 3 s, not 6. It also bounds the wait for the promoted
			// replica to report itself master (Sentinel asks it every second
			// during a failover) before the failover is given up, which
			// rules out going lower.
			fmt.Sprintf("sentinel failover-timeout %s 1500\n", SentinelMasterName) +
			fmt.Sprintf("sentinel parallel-syncs %s 1\n", SentinelMasterName)
		if err := os.WriteFile(conf, []byte(lines), 0o600); err != nil {
			t.Fatalf("storetest: write %s: %v", conf, err)
		}
		s.sentinels = append(s.sentinels, privateRedisNode(t, fmt.Sprintf("redis sentinel %d", i), []string{server, conf, "--sentinel"},
			func(int) []string { return nil }))
	}
	await(t, 30*time.Second, "redis sentinels know the replica and each other", func(ctx context.Context) error {
		for _, sn := range s.sentinels {
			client := redis.NewSentinelClient(&redis.Options{Addr: sn.addr(), MaxRetries: -1})
			err := func() error {
				defer client.Close()
				replicas, err := client.Replicas(ctx, SentinelMasterName).Result()
				if err != nil {
					return err
				}
				if len(replicas) != 1 || replicas[0]["flags"] != "slave" || replicas[0]["master-link-status"] != "ok" {
					return fmt.Errorf("%s sees replicas %v", sn.addr(), replicas)
				}
				peers, err := client.Sentinels(ctx, SentinelMasterName).Result()
				if err != nil {
					return err
				}
				if len(peers) != 2 {
					return fmt.Errorf("%s knows %d other sentinels", sn.addr(), len(peers))
				}
				return nil
			}()
			if err != nil {
				return err
			}
		}
		return nil
	})
	return s
}

// URL is the deployment in the form REDIS_URL takes for Sentinel:
// redis://sentinel1/0?master_name=NAME&addr=sentinel2&addr=sentinel3.
func (s *RedisSentinel) URL() string {
	return fmt.Sprintf("redis://%s/0?master_name=%s&addr=%s&addr=%s",
		s.sentinels[0].addr(), SentinelMasterName, s.sentinels[1].addr(), s.sentinels[2].addr())
}

// Master is the host:port of the server the Sentinels call master now.
func (s *RedisSentinel) Master() string {
	s.t.Helper()
	client := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].addr(), MaxRetries: -1})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, err := client.GetMasterAddrByName(ctx, SentinelMasterName).Result()
	if err != nil || len(addr) != 2 {
		s.t.Fatalf("storetest: ask sentinel for the master: %v %v", addr, err)
	}
	return net.JoinHostPort(addr[0], addr[1])
}

// Replica is the host:port of the server started as the replica.
func (s *RedisSentinel) Replica() string { return s.replica.addr() }

// KillMaster ends the first master with SIGKILL and waits until every
// Sentinel names the replica master and the replica says it is. It returns
// the new master's address. There is one replica: once only.
func (s *RedisSentinel) KillMaster() string {
	s.t.Helper()
	if !s.master.Running() {
		s.t.Fatalf("storetest: kill redis sentinel master: already killed")
	}
	s.master.Kill()
	want := s.replica.addr()
	await(s.t, 60*time.Second, "redis sentinel failover", func(ctx context.Context) error {
		for _, sn := range s.sentinels {
			client := redis.NewSentinelClient(&redis.Options{Addr: sn.addr(), MaxRetries: -1})
			addr, err := client.GetMasterAddrByName(ctx, SentinelMasterName).Result()
			_ = client.Close()
			if err != nil {
				return err
			}
			if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != want {
				return fmt.Errorf("%s names %v master", sn.addr(), addr)
			}
		}
		client := nodeClient(want)
		defer client.Close()
		repl, err := client.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "role:master") {
			return errors.New("the replica is not master yet")
		}
		return nil
	})
	return want
}

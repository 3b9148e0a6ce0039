package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// services is the shared Postgres and Redis every system under test uses,
// and the throwaway databases and key prefixes this run creates on them.
type services struct {
	databaseURL string // as given; its database is used only to create and drop others
	redisURL    string
	runID       string // unique per hwbench process: hwbench_<unix>_<pid>
	tmp         string // logs of the hookwheel processes

	mu        sync.Mutex
	databases []string
	prefixes  []string // Redis key prefixes to delete at the end
}

func newServices(databaseURL, redisURL string) (*services, error) {
	s := &services{
		databaseURL: databaseURL,
		redisURL:    redisURL,
		runID:       fmt.Sprintf("hwbench_%d_%d", time.Now().Unix(), os.Getpid()),
	}
	tmp, err := os.MkdirTemp("", s.runID+"-")
	if err != nil {
		return nil, err
	}
	s.tmp = tmp
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w (set DATABASE_URL)", redactURL(databaseURL), err)
	}
	_ = conn.Close(ctx)
	rdb, err := s.redis()
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis at %s: %w (set REDIS_URL)", redactURL(redisURL), err)
	}
	return s, nil
}

func (s *services) redis() (*redis.Client, error) {
	opt, err := redis.ParseURL(s.redisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	return redis.NewClient(opt), nil
}

// withDatabase is databaseURL pointing at database name.
func withDatabase(databaseURL, name string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// withParam is databaseURL with the query parameter name set to value.
func withParam(databaseURL, name, value string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL: %w", err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// createDatabase creates a fresh database named <runID>_<suffix> and returns
// its URL. It is dropped by cleanup.
func (s *services) createDatabase(ctx context.Context, suffix string) (string, error) {
	name := s.runID + "_" + suffix
	conn, err := pgx.Connect(ctx, s.databaseURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	s.mu.Lock()
	s.databases = append(s.databases, name)
	s.mu.Unlock()
	return withDatabase(s.databaseURL, name)
}

func (s *services) dropDatabase(ctx context.Context, dbURL string) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return
	}
	name := strings.TrimPrefix(u.Path, "/")
	conn, err := pgx.Connect(ctx, s.databaseURL)
	if err != nil {
		logf("drop database %s: %v", name, err)
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		logf("drop database %s: %v", name, err)
		return
	}
	s.mu.Lock()
	for i, d := range s.databases {
		if d == name {
			s.databases = append(s.databases[:i], s.databases[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
}

// redisPrefix returns a fresh key prefix, deleted by cleanup.
func (s *services) redisPrefix(suffix string) string {
	p := strings.ReplaceAll(s.runID, "_", ":") + ":" + suffix + ":"
	s.mu.Lock()
	s.prefixes = append(s.prefixes, p)
	s.mu.Unlock()
	return p
}

func (s *services) deleteRedisPrefix(ctx context.Context, prefix string) {
	rdb, err := s.redis()
	if err != nil {
		return
	}
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		rdb.Unlink(ctx, batch...)
	}
}

// cleanup drops every database and Redis prefix this run created.
func (s *services) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s.mu.Lock()
	dbs := append([]string(nil), s.databases...)
	prefixes := append([]string(nil), s.prefixes...)
	s.mu.Unlock()
	for _, d := range dbs {
		u, _ := withDatabase(s.databaseURL, d)
		s.dropDatabase(ctx, u)
	}
	for _, p := range prefixes {
		s.deleteRedisPrefix(ctx, p)
	}
	_ = os.RemoveAll(s.tmp)
}

// hookwheelNode is one `hookwheel serve` process.
type hookwheelNode struct {
	name    string
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:port
	logPath string
	exited  chan struct{}
	waitErr error
}

type nodeConfig struct {
	bin         string
	databaseURL string
	redisURL    string
	redisPrefix string
	adminToken  string
	senders     int
	extraEnv    []string
	args        []string // after serve, e.g. --dispatcher-only
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startNode starts `hookwheel serve` and waits until /readyz answers 200.
func (s *services) startNode(ctx context.Context, name string, cfg nodeConfig) (*hookwheelNode, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &hookwheelNode{
		name:    name,
		base:    fmt.Sprintf("http://127.0.0.1:%d", port),
		logPath: filepath.Join(s.tmp, name+".log"),
		exited:  make(chan struct{}),
	}
	logFile, err := os.Create(n.logPath)
	if err != nil {
		return nil, err
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOOKWHEEL_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "REDIS_URL=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"DATABASE_URL="+cfg.databaseURL,
		"REDIS_URL="+cfg.redisURL,
		"HOOKWHEEL_REDIS_PREFIX="+cfg.redisPrefix,
		"HOOKWHEEL_ALLOW_PRIVATE_TARGETS=true",
		"HOOKWHEEL_ADMIN_TOKEN="+cfg.adminToken,
		fmt.Sprintf("HOOKWHEEL_ADDR=127.0.0.1:%d", port),
		"HOOKWHEEL_LOG_LEVEL=warn",
		"HOOKWHEEL_LOG_FORMAT=text",
	)
	// The benchmark's one tenant measures the engine, not the limits a node
	// puts on a stranger: no node default applies to it (an older build
	// ignores these).
	for _, limit := range []string{"API_RATE", "API_BURST", "MAX_PENDING_TASKS", "MAX_SCHEDULES",
		"MAX_TIMEOUT", "DISPATCH_RATE", "DISPATCH_CONCURRENCY"} {
		env = append(env, "HOOKWHEEL_DEFAULT_"+limit+"=unlimited")
	}
	if cfg.senders > 0 {
		env = append(env, "HOOKWHEEL_SENDERS="+strconv.Itoa(cfg.senders))
	}
	env = append(env, cfg.extraEnv...)
	// HWBENCH_NODE_X=v reaches every node as X=v, e.g.
	// HWBENCH_NODE_HOOKWHEEL_PPROF_ADDR=127.0.0.1:6060 to profile it.
	for _, kv := range os.Environ() {
		if rest, ok := strings.CutPrefix(kv, "HWBENCH_NODE_"); ok {
			env = append(env, rest)
		}
	}
	n.cmd = exec.Command(cfg.bin, append([]string{"serve"}, cfg.args...)...)
	n.cmd.Env = env
	n.cmd.Stdout = logFile
	n.cmd.Stderr = logFile
	// Its own process group: a Ctrl-C to hwbench is handled by hwbench,
	// which stops the node itself.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.bin, err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		logFile.Close()
		close(n.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-n.exited:
			return nil, fmt.Errorf("hookwheel %s exited at start (%v):\n%s", name, n.waitErr, tail(n.logPath, 20))
		case <-ctx.Done():
			n.kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(n.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			n.kill()
			return nil, fmt.Errorf("hookwheel %s not ready after 60s:\n%s", name, tail(n.logPath, 20))
		}
	}
}

func (n *hookwheelNode) pid() int { return n.cmd.Process.Pid }

// kill sends SIGKILL (no graceful stop) and waits for the exit.
func (n *hookwheelNode) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// terminate asks for a graceful stop (SIGTERM) without waiting for it.
func (n *hookwheelNode) terminate() { _ = n.cmd.Process.Signal(syscall.SIGTERM) }

// stop asks for a graceful stop (SIGTERM), then kills after 20 s.
func (n *hookwheelNode) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.terminate()
	select {
	case <-n.exited:
	case <-time.After(20 * time.Second):
		logf("%s did not stop in 20s; killing it", n.name)
		n.kill()
	}
}

// rss returns the resident set size and its peak (VmHWM) of a process, in bytes.
func rss(pid int) (cur, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var target *int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			target = &cur
		case strings.HasPrefix(line, "VmHWM:"):
			target = &peak
		default:
			continue
		}
		fields := strings.Fields(line)
		if len(fields) >= 2 {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			*target = kb * 1024
		}
	}
	if cur == 0 {
		return 0, 0, errors.New("no VmRSS")
	}
	return cur, peak, sc.Err()
}

// rssSampler polls a process's RSS and keeps the largest value seen.
type rssSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	max  int64
}

func sampleRSS(pid int, every time.Duration) *rssSampler {
	r := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if cur, _, err := rss(pid); err == nil && cur > r.max {
				r.max = cur
			}
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

func (r *rssSampler) finish() int64 {
	close(r.stop)
	<-r.done
	return r.max
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "  " + strings.Join(all, "\n  ")
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "***")
	}
	return u.String()
}

// newPool opens a pgx pool of at most maxConns connections.
func newPool(ctx context.Context, dbURL string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// findRepoRoot walks up from the working directory to the hookwheel module.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/hookwheel/hookwheel\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the hookwheel module above the working directory; pass -hookwheel")
		}
		dir = parent
	}
}

// buildHookwheel builds cmd/hookwheel with the product's own go.mod.
func buildHookwheel(ctx context.Context, out string) (string, error) {
	root, err := findRepoRoot()
	if err != nil {
		return "", err
	}
	if out == "" {
		out = filepath.Join(root, "bench", "bin", "hookwheel")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/hookwheel")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	logf("building %s", out)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/hookwheel: %w", err)
	}
	return out, nil
}

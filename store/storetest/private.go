package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// PrivateService is a Postgres or Redis server of one test's own, on a free
// port of 127.0.0.1, which the test may stop, start and restart at will (to
// see what hookwheel does when its services go away). The server runs as a
// child of the test process and stops when the test ends.
//
// Its methods fail the test on error, so call them from the test's
// goroutine.
type PrivateService struct {
	t    testing.TB
	name string // "postgres" or "redis", for messages
	dir  string
	port int
	url  string
	// urlFor is the connection string of the service on port.
	urlFor func(port int) string
	// command returns the server's command line for the port.
	command func(port int) []string
	// ping succeeds once the server accepts work.
	ping func(ctx context.Context, url string) error
	// stopSignal asks the server to shut down cleanly.
	stopSignal syscall.Signal
	// deathSignal is what the server gets should the test process die.
	deathSignal syscall.Signal
	// cred runs the server as another user (Postgres refuses root).
	cred *syscall.Credential
	logs *tailBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// URL is the service's connection string: for Postgres, its maintenance
// database `postgres` as user postgres (trust auth); for Redis, database 0.
func (s *PrivateService) URL() string { return s.url }

// Port is the TCP port on 127.0.0.1 the service listens on; it keeps it
// across restarts.
func (s *PrivateService) Port() int { return s.port }

// Logs is the tail of what the server wrote to stdout and stderr.
func (s *PrivateService) Logs() string { return s.logs.String() }

// Running reports whether the server process is up (not whether it is ready).
func (s *PrivateService) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Start starts the stopped server again on the same port, with the data it
// had (Postgres; Redis keeps nothing), and returns once it accepts
// connections.
func (s *PrivateService) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("storetest: start private %s: %v\n%s", s.name, err, s.Logs())
	}
}

// Stop shuts the server down cleanly (Postgres: fast shutdown, which ends
// every session; Redis: SIGTERM) and waits for it to exit. Stopping a stopped
// server does nothing.
func (s *PrivateService) Stop() {
	s.t.Helper()
	if err := s.stop(30 * time.Second); err != nil {
		s.t.Fatalf("storetest: stop private %s: %v\n%s", s.name, err, s.Logs())
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Killing a stopped server does nothing.
func (s *PrivateService) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	fmt.Fprintf(s.logs, "--- storetest: killing %s\n", s.name)
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Restart is Stop then Start.
func (s *PrivateService) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

func (s *PrivateService) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.done:
		default:
			return errors.New("already running")
		}
	}
	argv := s.command(s.port)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	setDeathSignal(cmd.SysProcAttr, s.deathSignal)
	fmt.Fprintf(s.logs, "--- storetest: starting %s on port %d\n", s.name, s.port)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	var err error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = s.ping(ctx, s.url)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return fmt.Errorf("not accepting connections on port %d within 30s: %w", s.port, err)
		}
		select {
		case <-done:
			return fmt.Errorf("exited before accepting connections (%v): %w", cmd.ProcessState, errExitedEarly)
		case <-poll.C:
		}
	}
}

var errExitedEarly = errors.New("server exited early")

func (s *PrivateService) stop(within time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	fmt.Fprintf(s.logs, "--- storetest: stopping %s\n", s.name)
	if err := s.cmd.Process.Signal(s.stopSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(within):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		return fmt.Errorf("did not stop within %s of %s; killed", within, s.stopSignal)
	}
}

// firstStart starts a new service, moving to another free port when the one
// picked was taken in the meantime.
func (s *PrivateService) firstStart() {
	s.t.Helper()
	var err error
	for range 3 {
		s.port = freePort(s.t)
		s.url = s.urlFor(s.port)
		if err = s.start(); err == nil {
			s.t.Cleanup(func() {
				if err := s.stop(30 * time.Second); err != nil {
					s.t.Logf("storetest: stop private %s: %v", s.name, err)
				}
				if s.t.Failed() {
					s.t.Logf("storetest: private %s output (tail):\n%s", s.name, s.Logs())
				}
			})
			return
		}
		if !errors.Is(err, errExitedEarly) || !strings.Contains(strings.ToLower(s.Logs()), "address already in use") {
			break
		}
	}
	s.t.Fatalf("storetest: start private %s: %v\n%s", s.name, err, s.Logs())
}

// PrivatePostgres runs a Postgres cluster of this test's own: initdb into a
// temporary directory (as the postgres OS user when the test runs as root,
// since Postgres refuses root), trust authentication, TCP on 127.0.0.1 only,
// fsync off. It stops and is deleted when the test ends.
func PrivatePostgres(t testing.TB) *PrivateService {
	t.Helper()
	bin := postgresBinDir(t)
	cred, uid, gid := postgresCredential(t)

	removeStalePostgresDirs()
	dir, err := os.MkdirTemp("", postgresDirPattern)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("storetest: chown %s to the postgres user: %v", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("storetest: initdb %s: %v\n%s", data, err, out)
	}
	// Throwaway data: no fsync, and no Unix socket (its path could outgrow
	// the limit, and nothing needs it). synchronous_commit stays on: a clean
	// stop must not lose what was committed.
	conf := "\n# storetest\n" +
		"listen_addresses = '127.0.0.1'\n" +
		"unix_socket_directories = ''\n" +
		"fsync = off\n" +
		"full_page_writes = off\n" +
		"max_connections = 200\n" +
		"logging_collector = off\n"
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatalf("storetest: configure %s: %v", data, err)
	}

	s := &PrivateService{
		t:    t,
		name: "postgres",
		dir:  dir,
		urlFor: func(port int) string {
			return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		},
		command: func(port int) []string {
			return []string{filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port)}
		},
		ping: func(ctx context.Context, url string) error {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			return conn.Ping(ctx)
		},
		stopSignal:  syscall.SIGINT,  // fast shutdown
		deathSignal: syscall.SIGQUIT, // immediate shutdown, children included
		cred:        cred,
		logs:        newTailBuffer(64 << 10),
	}
	s.firstStart()
	return s
}

// PrivateRedisService is a PrivateService that is a Redis.
type PrivateRedisService struct {
	*PrivateService
}

// Flush deletes every key (FLUSHALL).
func (r *PrivateRedisService) Flush() {
	r.t.Helper()
	opts, err := redis.ParseURL(r.url)
	if err != nil {
		r.t.Fatalf("storetest: %v", err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.FlushAll(ctx).Err(); err != nil {
		r.t.Fatalf("storetest: flush private redis: %v", err)
	}
}

// PrivateRedis runs a redis-server of this test's own, keeping nothing on disk
// (--save ” --appendonly no): a restart starts it empty. It stops when the
// test ends.
func PrivateRedis(t testing.TB) *PrivateRedisService {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("storetest: redis-server not found on PATH: these tests need the Redis server binaries; " +
			"run `make test` (deploy/dev/services.sh installs them), or install the redis-server package")
	}
	dir := t.TempDir()
	s := &PrivateService{
		t:    t,
		name: "redis",
		dir:  dir,
		urlFor: func(port int) string {
			return fmt.Sprintf("redis://127.0.0.1:%d/0", port)
		},
		command: func(port int) []string {
			return []string{server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
				"--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--dir", dir, "--logfile", ""}
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
	return &PrivateRedisService{s}
}

const postgresDirPattern = "hookwheel-pg-"

// removeStalePostgresDirs deletes the clusters of test processes that died
// without cleaning up (a panic, a -timeout): those older than staleAfter.
func removeStalePostgresDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), postgresDirPattern+"*"))
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > staleAfter {
			_ = os.RemoveAll(dir)
		}
	}
}

// postgresBinDir finds initdb and postgres: pg_config --bindir, else the
// newest /usr/lib/postgresql/*/bin (Debian), else PATH.
func postgresBinDir(t testing.TB) string {
	t.Helper()
	usable := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); usable(dir) {
			return dir
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if usable(dir) {
			return dir
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && usable(filepath.Dir(p)) {
		return filepath.Dir(p)
	}
	t.Fatalf("storetest: Postgres server binaries (initdb, postgres) not found via pg_config --bindir, " +
		"/usr/lib/postgresql/*/bin or PATH: these tests need them; run `make test` " +
		"(deploy/dev/services.sh installs them), or install the postgresql package")
	return ""
}

// postgresCredential is the user to run Postgres as: the postgres OS user
// when the test runs as root (Postgres refuses to run as root), else nil (the
// test's own user).
func postgresCredential(t testing.TB) (cred *syscall.Credential, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, -1, -1
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("storetest: running as root, Postgres must run as another user, but there is no postgres OS user (%v); "+
			"run `make test` (deploy/dev/services.sh creates it), or: useradd --system postgres", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, uid, gid
}

// setDeathSignal has the kernel send sig to the server should the test
// process die without stopping it (a panic, a -timeout), so that no server
// outlives its test. Only Linux has it (SysProcAttr.Pdeathsig); elsewhere
// this does nothing.
func setDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	if f := reflect.ValueOf(attr).Elem().FieldByName("Pdeathsig"); f.IsValid() && f.CanSet() {
		f.Set(reflect.ValueOf(sig))
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storetest: find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tailBuffer keeps the last max bytes written to it; exec copies a server's
// stdout and stderr into it from two goroutines.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

package e2e_test

// Helpers for the tests that run the real hookwheel binary as separate
// processes: build it once, start `hookwheel serve` processes, kill and
// restart them, and count what a receiver gets.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain removes the hookwheel binary the process tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtDir  string
	builtBin  string
	buildErr  error
)

// hookwheelBinary builds cmd/hookwheel once per test binary and returns its path.
//
// HOOKWHEEL_E2E_BINARY, when set, is run instead: a binary built from an
// earlier commit, to see a test fail on the behaviour it guards against.
func hookwheelBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("HOOKWHEEL_E2E_BINARY"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "hookwheel-e2e-")
		if buildErr != nil {
			return
		}
		bin := filepath.Join(builtDir, "hookwheel")
		started := time.Now()
		// go test puts the GOROOT/bin of the toolchain running the tests
		// first on the test binary's PATH, so this is that toolchain.
		out, err := exec.Command("go", "build", "-o", bin, "github.com/hookwheel/hookwheel/cmd/hookwheel").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/hookwheel: %w\n%s", err, out)
			return
		}
		builtBin = bin
		fmt.Fprintf(os.Stderr, "e2e: built hookwheel in %s\n", time.Since(started).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// freeLocalAddr is a 127.0.0.1 address nothing listened on a moment ago.
func freeLocalAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveNode is one `hookwheel serve` on a fixed address: the current
// process, and those it replaced after a kill. Its methods return errors
// rather than failing the test, so that a killer goroutine may use them.
type serveNode struct {
	t    testing.TB
	bin  string
	name string
	addr string
	base string
	env  []string
	args []string
	logs *syncLog

	mu   sync.Mutex
	proc *serveProc
	gen  int
}

// serveProc is one process of a node.
type serveProc struct {
	cmd *exec.Cmd
	pid int
	// done is closed once the process has exited; err is then cmd.Wait's.
	done chan struct{}
	err  error
	// expected is set before the test ends the process itself, so that its
	// exit is not reported as a crash.
	expected atomic.Bool
}

// startServe starts `hookwheel serve` (plus args) with the test process's
// environment, then env (later entries win), on a free address, and waits
// until /readyz answers 200. At the end of the test a node still running is
// killed, and the logs of every process it ran are shown if the test failed.
// A process exiting on its own, not by Kill or Term, fails the test.
func startServe(t testing.TB, name string, env []string, args ...string) *serveNode {
	t.Helper()
	n := newServe(t, name, env, args...)
	if err := n.start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := n.waitReady(60 * time.Second); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, n.logs.tail(100))
	}
	return n
}

// newServe prepares a node without starting it.
func newServe(t testing.TB, name string, env []string, args ...string) *serveNode {
	t.Helper()
	addr := freeLocalAddr(t)
	n := &serveNode{
		t:    t,
		bin:  hookwheelBinary(t),
		name: name,
		addr: addr,
		base: "http://" + addr,
		env:  append(slices.Clip(env), "HOOKWHEEL_ADDR="+addr),
		args: append([]string{"serve"}, args...),
		logs: &syncLog{max: 512 << 10},
	}
	t.Cleanup(func() {
		if p := n.current(); p != nil {
			p.expected.Store(true)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s: output of its processes (last 200 lines):\n%s", n.name, n.logs.tail(200))
		}
	})
	return n
}

func (n *serveNode) current() *serveProc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// start starts a new process for the node; the previous one must have exited.
func (n *serveNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.proc; p != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is still running (pid %d)", n.name, p.pid)
		}
	}
	n.gen++
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	// Its own process group: a Ctrl-C of go test reaches the test, which
	// then stops its processes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(n.logs, "=== %s: process %d starting at %s\n", n.name, n.gen, time.Now().Format("15:04:05.000"))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	p := &serveProc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	gen := n.gen
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(n.logs, "=== %s: process %d (pid %d) exited at %s: %v\n", n.name, gen, p.pid, time.Now().Format("15:04:05.000"), p.err)
		close(p.done)
		if !p.expected.Load() {
			n.t.Errorf("%s: process %d (pid %d) exited on its own: %v", n.name, gen, p.pid, p.err)
		}
	}()
	n.proc = p
	return nil
}

// waitReady polls /readyz until it answers 200.
func (n *serveNode) waitReady(within time.Duration) error {
	p := n.current()
	if p == nil {
		return fmt.Errorf("%s was never started", n.name)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	last := "no answer"
	for {
		resp, err := client.Get(n.base + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s %s", resp.Status, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: %s", n.name, within, last)
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v", n.name, p.err)
		case <-poll.C:
		}
	}
}

// Kill sends SIGKILL to the running process and waits for it to go; it
// returns the instant of the signal.
func (n *serveNode) Kill() (time.Time, error) {
	p := n.current()
	if p == nil {
		return time.Time{}, fmt.Errorf("%s is not running", n.name)
	}
	p.expected.Store(true)
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return at, fmt.Errorf("kill %s: %w", n.name, err)
	}
	select {
	case <-p.done:
		return at, nil
	case <-time.After(10 * time.Second):
		return at, fmt.Errorf("%s (pid %d) still running 10s after SIGKILL", n.name, p.pid)
	}
}

// Signal sends sig to the running process, and returns the instant.
func (n *serveNode) Signal(sig syscall.Signal) (time.Time, error) {
	p := n.current()
	if p == nil {
		return time.Time{}, fmt.Errorf("%s is not running", n.name)
	}
	at := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return at, fmt.Errorf("signal %s to %s: %w", sig, n.name, err)
	}
	return at, nil
}

// Restart starts a new process on the same address and environment, and
// waits until it is ready.
func (n *serveNode) Restart() error {
	if err := n.start(); err != nil {
		return err
	}
	return n.waitReady(60 * time.Second)
}

// Term sends SIGTERM and waits for the process to exit with status 0.
func (n *serveNode) Term(within time.Duration) error {
	p := n.current()
	if p == nil {
		return fmt.Errorf("%s is not running", n.name)
	}
	p.expected.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM %s: %w", n.name, err)
	}
	return n.Wait(within)
}

// Wait waits for the process to exit and returns an error unless it exited
// with status 0.
func (n *serveNode) Wait(within time.Duration) error {
	p := n.current()
	if p == nil {
		return fmt.Errorf("%s is not running", n.name)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s (pid %d) exited: %w", n.name, p.pid, p.err)
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("%s (pid %d) still running after %s", n.name, p.pid, within)
	}
}

// Running reports whether the node's process is up, and its pid.
func (n *serveNode) Running() (int, bool) {
	p := n.current()
	if p == nil {
		return 0, false
	}
	select {
	case <-p.done:
		return p.pid, false
	default:
		return p.pid, true
	}
}

// syncLog collects the output of a node's processes, which exec copies from
// two goroutines per process, keeping the last max bytes.
type syncLog struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (s *syncLog) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, b...)
	if over := len(s.buf) - s.max; over > 0 {
		s.buf = append(s.buf[:0], s.buf[over:]...)
	}
	return len(b), nil
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf)
}

// tail is the last n lines.
func (s *syncLog) tail(n int) string {
	lines := strings.SplitAfter(s.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

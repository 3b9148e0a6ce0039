package e2e_test

// Helpers for the tests that run the real hookwheel binary as separate
// processes: build it once, start `hookwheel serve` processes, kill and
// restart them, and count what a receiver gets.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// hit is one webhook request as the counting receiver saw it.
type hit struct {
	id          string // webhook-id
	idemKey     string // Idempotency-Key
	attempt     int    // Hookwheel-Attempt
	scheduledAt time.Time
	arrived     time.Time
	bad         string // what was wrong with the headers, if anything
}

func (h hit) lateness() time.Duration { return h.arrived.Sub(h.scheduledAt) }

// countingReceiver is a real HTTP server that answers 200 to every webhook
// and records who it was, counting deliveries per webhook-id. Every request
// signals progress.
type countingReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	hits     []hit
	byID     map[string][]int // indexes into hits
	progress chan struct{}
}

func newCountingReceiver(t testing.TB) *countingReceiver {
	r := &countingReceiver{byID: map[string][]int{}, progress: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := hit{arrived: time.Now(), id: req.Header.Get("webhook-id"), idemKey: req.Header.Get("Idempotency-Key")}
		_, _ = io.Copy(io.Discard, req.Body)
		var bad []string
		var err error
		if h.attempt, err = strconv.Atoi(req.Header.Get("Hookwheel-Attempt")); err != nil || h.attempt < 1 {
			bad = append(bad, fmt.Sprintf("Hookwheel-Attempt %q", req.Header.Get("Hookwheel-Attempt")))
		}
		if h.scheduledAt, err = time.Parse(time.RFC3339Nano, req.Header.Get("Hookwheel-Scheduled-At")); err != nil {
			bad = append(bad, fmt.Sprintf("Hookwheel-Scheduled-At %q", req.Header.Get("Hookwheel-Scheduled-At")))
		}
		if h.id == "" {
			bad = append(bad, "no webhook-id")
		}
		h.bad = strings.Join(bad, ", ")
		r.mu.Lock()
		r.byID[h.id] = append(r.byID[h.id], len(r.hits))
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		select {
		case r.progress <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

// counts returns the number of distinct webhook-ids and of deliveries.
func (r *countingReceiver) counts() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID), len(r.hits)
}

func (r *countingReceiver) snapshot() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hits)
}

// waitDistinct waits until n distinct webhook-ids have arrived, or the
// deadline passes.
func (r *countingReceiver) waitDistinct(n int, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if d, _ := r.counts(); d >= n {
			return nil
		}
		select {
		case <-r.progress:
		case <-timer.C:
			d, total := r.counts()
			return fmt.Errorf("%d of %d tasks arrived (%d deliveries) by the deadline", d, n, total)
		}
	}
}

// settle watches the receiver for a while, so that a late duplicate has its
// chance to arrive, and returns how many deliveries came in meanwhile.
func (r *countingReceiver) settle(d time.Duration) int {
	_, before := r.counts()
	<-time.After(d)
	_, after := r.counts()
	return after - before
}

// apiClient makes the tests' API calls; it keeps enough connections per
// node for the concurrent task creators.
var apiClient = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	},
}

// apiCall sends a JSON request and returns the status and body.
func apiCall(ctx context.Context, method, url, token string, body any, header map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// createTenantVia creates a tenant through the admin API of base and
// returns its API key.
func createTenantVia(t testing.TB, base, adminToken, name string) string {
	t.Helper()
	status, body, err := apiCall(context.Background(), http.MethodPost, base+"/v1/admin/tenants", adminToken, map[string]string{"name": name}, nil)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create tenant: %d %v %s", status, err, body)
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.APIKey == "" {
		t.Fatalf("create tenant: %v %s", err, body)
	}
	return created.APIKey
}

// plannedTask is a task a test creates, and what its webhooks must carry.
type plannedTask struct {
	runAt   time.Time
	idemKey string // given at creation; empty: none
	// Filled in at creation.
	id          string
	expectedKey string // Idempotency-Key of its webhooks
}

// createTasks creates the tasks with POST /v1/tasks, spread round-robin over
// the nodes' APIs by clients concurrent callers, and fills in their ids. It
// fails the test on any answer but 201.
func createTasks(t testing.TB, bases []string, apiKey, url string, tasks []plannedTask, clients int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		mu     sync.Mutex
		failed error
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) || ctx.Err() != nil {
					return
				}
				task := &tasks[i]
				var header map[string]string
				if task.idemKey != "" {
					header = map[string]string{"Idempotency-Key": task.idemKey}
				}
				req := map[string]any{"url": url, "body": `{"n":` + strconv.Itoa(i) + `}`, "run_at": task.runAt.Format(time.RFC3339Nano)}
				status, body, err := apiCall(ctx, http.MethodPost, bases[i%len(bases)]+"/v1/tasks", apiKey, req, header)
				var created struct {
					ID             string  `json:"id"`
					IdempotencyKey *string `json:"idempotency_key"`
				}
				if err == nil && status != http.StatusCreated {
					err = fmt.Errorf("status %d: %s", status, body)
				}
				if err == nil {
					err = json.Unmarshal(body, &created)
				}
				if err == nil && created.ID == "" {
					err = fmt.Errorf("no id in %s", body)
				}
				if err != nil {
					mu.Lock()
					if failed == nil {
						failed = fmt.Errorf("create task %d via %s: %w", i, bases[i%len(bases)], err)
					}
					mu.Unlock()
					cancel()
					return
				}
				task.id = created.ID
				task.expectedKey = task.idemKey
				if task.expectedKey == "" {
					task.expectedKey = created.ID
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
}

// countTasks counts the tenant's tasks in status through GET /v1/tasks.
func countTasks(ctx context.Context, base, apiKey, status string) (int, error) {
	count := 0
	cursor := ""
	for {
		url := base + "/v1/tasks?limit=500&status=" + status
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		code, body, err := apiCall(ctx, http.MethodGet, url, apiKey, nil, nil)
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("list tasks: %d %s", code, body)
		}
		var page struct {
			Data       []json.RawMessage `json:"data"`
			NextCursor *string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, err
		}
		count += len(page.Data)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return count, nil
		}
		cursor = *page.NextCursor
	}
}

// waitTasksInStatus polls until want of the tenant's tasks are in status.
func waitTasksInStatus(base, apiKey, status string, want int, deadline time.Time) error {
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err := countTasks(ctx, base, apiKey, status)
		cancel()
		if err == nil && got == want {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("%d of %d tasks %s by the deadline", got, want, status)
		}
		<-poll.C
	}
}

// checkHits checks every delivery against the planned tasks: a known
// webhook-id, the task's Idempotency-Key, its run_at as
// Hookwheel-Scheduled-At, not before it. It returns the first delivery of
// each task by id and the ids delivered more than once.
func checkHits(t testing.TB, tasks []plannedTask, hits []hit) (first map[string]hit, duplicated []string) {
	t.Helper()
	byID := make(map[string]*plannedTask, len(tasks))
	for i := range tasks {
		byID[tasks[i].id] = &tasks[i]
	}
	first = make(map[string]hit, len(tasks))
	count := map[string]int{}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for _, h := range hits {
		task, ok := byID[h.id]
		switch {
		case h.bad != "":
			problem("delivery of %s: bad headers: %s", h.id, h.bad)
			continue
		case !ok:
			problem("delivery with unknown webhook-id %q", h.id)
			continue
		}
		if h.idemKey != task.expectedKey {
			problem("task %s: Idempotency-Key %q, want %q (attempt %d)", h.id, h.idemKey, task.expectedKey, h.attempt)
		}
		if !h.scheduledAt.Equal(task.runAt) {
			problem("task %s: Hookwheel-Scheduled-At %s, want its run_at %s", h.id, h.scheduledAt.Format(time.RFC3339Nano), task.runAt.Format(time.RFC3339Nano))
		}
		if h.arrived.Before(task.runAt) {
			problem("task %s arrived %s before its run_at", h.id, task.runAt.Sub(h.arrived))
		}
		count[h.id]++
		if f, seen := first[h.id]; !seen || h.arrived.Before(f.arrived) {
			first[h.id] = h
		}
	}
	for _, task := range tasks {
		if count[task.id] == 0 {
			problem("task %s (run_at %s) never arrived", task.id, task.runAt.Format(time.RFC3339Nano))
		}
		if count[task.id] > 1 {
			duplicated = append(duplicated, task.id)
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d+ problems with the deliveries:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return first, duplicated
}

// latencies summarises lateness (arrival minus Hookwheel-Scheduled-At).
type latencies []time.Duration

func (l latencies) sorted() latencies {
	s := slices.Clone(l)
	slices.Sort(s)
	return s
}

// quantile of a sorted list; 0 when empty.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q*float64(len(l))+0.5) - 1
	return l[max(0, min(len(l)-1, i))]
}

func (l latencies) String() string {
	s := l.sorted()
	if len(s) == 0 {
		return "none"
	}
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return fmt.Sprintf("n=%d p50=%s p99=%s p99.9=%s max=%s", len(s), ms(s.quantile(0.5)), ms(s.quantile(0.99)), ms(s.quantile(0.999)), ms(s[len(s)-1]))
}

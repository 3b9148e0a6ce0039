package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// webhookArgs is the job of the peers: POST body to url, signed.
type webhookArgs struct {
	URL  string `json:"url"`
	ID   string `json:"id"`
	Body string `json:"body"`
}

func (webhookArgs) Kind() string { return "hwbench_webhook" }

// signedPoster sends what hookwheel sends: a POST with a Standard Webhooks
// signature (webhook-id, webhook-timestamp, webhook-signature).
type signedPoster struct {
	secret string
	wh     *standardwebhooks.Webhook
	client *http.Client
}

func newSignedPoster(conns int) (*signedPoster, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	return &signedPoster{
		secret: secret,
		wh:     wh,
		client: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 90 * time.Second,
			},
		},
	}, nil
}

func (p *signedPoster) post(ctx context.Context, a webhookArgs) error {
	body := []byte(a.Body)
	now := time.Now()
	sig, err := p.wh.Sign(a.ID, now, body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(standardwebhooks.HeaderWebhookID, a.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return nil
}

// runPeers runs hookwheel, River and Asynq one after the other on the same
// Postgres, Redis and receiver, and ends with the comparison lines.
func runPeers(ctx context.Context, o options, svc *services, recv *receiver, rep *reporter) error {
	type peerRuns struct {
		Precision  []*lateResult `json:"fire_precision"`
		Throughput []*lateResult `json:"throughput"`
		Errors     []string      `json:"errors,omitempty"`
	}
	var all peerRuns
	prec := map[string]*lateResult{}
	thr := map[string]*lateResult{}
	var failed []string
	for _, name := range strings.Split(o.systems, ",") {
		name = strings.TrimSpace(name)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var (
			sys system
			err error
		)
		switch name {
		case "hookwheel":
			sys, err = startHookwheel(ctx, svc, hwOptions(o), "peers")
		case "river":
			sys, err = startRiver(ctx, svc, o.river)
		case "asynq":
			sys, err = startAsynq(ctx, svc, o.asynq)
		default:
			return fmt.Errorf("-systems: unknown system %q", name)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			logf("%s: %v", name, err)
			continue
		}
		err = func() error {
			defer sys.Close()
			p, err := runLateness(ctx, sys, recv, lateSpec{
				scenario: "fire_precision", label: fmt.Sprintf("%d/s", o.peerRate),
				tasks: int(float64(o.peerRate) * o.peerDuration.Seconds()), spread: o.peerDuration,
			})
			if err != nil {
				return err
			}
			prec[name] = p
			all.Precision = append(all.Precision, p)
			pause(ctx)
			t, err := throughput(ctx, sys, recv, o.peerThroughputTasks)
			if err != nil {
				return err
			}
			thr[name] = t
			all.Throughput = append(all.Throughput, t)
			rep.settings[name] = sys.Settings()
			return nil
		}()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			logf("%s: %v", name, err)
		}
		pause(ctx)
	}
	all.Errors = failed
	if err := rep.writeJSON("peers", all); err != nil {
		return err
	}

	rep.printf("hookwheel, River and Asynq in turn, on the same Postgres, Redis and receiver (in the harness process). ")
	rep.printf("Each delivers the same Standard-Webhooks-signed POST. Lateness is arrival minus the intended due time; ")
	rep.printf("an early arrival counts as 0 ms late and is counted in *early*.\n\n")
	rep.printf("## Results\n\n")
	rep.latenessTable(fmt.Sprintf("Fire precision: %d tasks/s falling due evenly for %s", o.peerRate, o.peerDuration), all.Precision)
	rep.throughputTable(all.Throughput)

	var lines []string
	hwT, hwP := thr["hookwheel"], prec["hookwheel"]
	for _, peer := range []string{"river", "asynq"} {
		if !strings.Contains(o.systems, peer) {
			continue
		}
		pt, pp := thr[peer], prec[peer]
		if hwT != nil && pt != nil {
			lines = append(lines, fmt.Sprintf("peer=%s metric=throughput hookwheel=%.0f peer_value=%.0f ratio=%.2f",
				peer, hwT.AchievedRate, pt.AchievedRate, hwT.AchievedRate/pt.AchievedRate))
		}
		if hwT != nil && pt != nil && hwT.Life != nil && pt.Life != nil && peer == "river" {
			// Asynq keeps its tasks in Redis: its Postgres cost is nil.
			lines = append(lines, fmt.Sprintf("peer=%s metric=postgres_cpu_per_task_ms hookwheel=%.3f peer_value=%.3f ratio=%.2f",
				peer, hwT.Life.PostgresCPUPerTaskMs, pt.Life.PostgresCPUPerTaskMs, pt.Life.PostgresCPUPerTaskMs/hwT.Life.PostgresCPUPerTaskMs))
			lines = append(lines, fmt.Sprintf("peer=%s metric=wal_bytes_per_task hookwheel=%.0f peer_value=%.0f ratio=%.2f",
				peer, hwT.Life.WALBytesPerTask, pt.Life.WALBytesPerTask, pt.Life.WALBytesPerTask/hwT.Life.WALBytesPerTask))
			if hs, ps := hwT.Life.Storing, pt.Life.Storing; hs != nil && ps != nil {
				// The whole life split: storing the tasks, then dispatching them.
				lines = append(lines, fmt.Sprintf("peer=%s metric=postgres_cpu_storing_ms hookwheel=%.3f peer_value=%.3f ratio=%.2f",
					peer, hs.PostgresCPUPerTaskMs, ps.PostgresCPUPerTaskMs, ps.PostgresCPUPerTaskMs/hs.PostgresCPUPerTaskMs))
				hd, pd := hwT.Life.PostgresCPUPerTaskMs-hs.PostgresCPUPerTaskMs, pt.Life.PostgresCPUPerTaskMs-ps.PostgresCPUPerTaskMs
				lines = append(lines, fmt.Sprintf("peer=%s metric=postgres_cpu_dispatch_ms hookwheel=%.3f peer_value=%.3f ratio=%.2f",
					peer, hd, pd, pd/hd))
			}
		}
		if hwP != nil && pp != nil {
			lines = append(lines, fmt.Sprintf("peer=%s metric=p99_lateness_ms hookwheel=%.2f peer_value=%.2f ratio=%.2f",
				peer, hwP.Lateness.P99Ms, pp.Lateness.P99Ms, pp.Lateness.P99Ms/hwP.Lateness.P99Ms))
		}
	}
	rep.printf("## Comparison\n\nA ratio above 1 means hookwheel is ahead (throughput: hookwheel/peer; lateness and Postgres cost per task: peer/hookwheel).\n\n```\n%s\n```\n\n", strings.Join(lines, "\n"))
	for _, name := range []string{"river", "asynq"} {
		if p := prec[name]; p != nil && p.Early > 0 {
			rep.printf("%s delivered %d of %d tasks early (up to %.0f ms before their due time); they count as 0 ms late above.\n\n", name, p.Early, p.Tasks, p.EarlyMaxMs)
		}
	}
	rep.settingsTable()
	var series []plotSeries
	for _, name := range []string{"hookwheel", "river", "asynq"} {
		if p := prec[name]; p != nil {
			series = append(series, plotSeries{name: name, hist: p.hist, early: p.Early})
		}
	}
	if err := rep.plotLateness("peers-lateness", fmt.Sprintf("%d tasks/s due", o.peerRate), series); err != nil {
		return err
	}
	rep.printf("![lateness at %d/s](%s)\n", o.peerRate, filepath.Base(rep.path("peers-lateness.png")))
	if err := rep.writeMarkdown("peers", "hookwheel vs River vs Asynq"); err != nil {
		return err
	}

	for _, name := range []string{"river", "asynq"} {
		if p := prec[name]; p != nil && p.Early > 0 {
			fmt.Printf("note: %s delivered %d of %d tasks early (up to %.0f ms before due); early arrivals count as 0 ms lateness\n", name, p.Early, p.Tasks, p.EarlyMaxMs)
		}
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	if len(failed) > 0 {
		return fmt.Errorf("some systems failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// ---- River ----

type riverOptions struct {
	workers           int
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration
	poolConns         int32
}

type riverSystem struct {
	svc    *services
	opts   riverOptions
	dbURL  string
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	poster *signedPoster
}

type riverWorker struct {
	river.WorkerDefaults[webhookArgs]
	poster *signedPoster
}

func (w *riverWorker) Work(ctx context.Context, job *river.Job[webhookArgs]) error {
	return w.poster.post(ctx, job.Args)
}

func startRiver(ctx context.Context, svc *services, opts riverOptions) (_ *riverSystem, err error) {
	r := &riverSystem{svc: svc, opts: opts}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.dbURL, err = svc.createDatabase(ctx, "river"); err != nil {
		return nil, err
	}
	if r.pool, err = newPool(ctx, r.dbURL, opts.poolConns); err != nil {
		return nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(r.pool), nil)
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	if r.poster, err = newSignedPoster(opts.workers); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{poster: r.poster})
	r.client, err = river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opts.workers}},
		Workers:           workers,
		FetchCooldown:     opts.fetchCooldown,
		FetchPollInterval: opts.fetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(logWriter{}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	if err := r.client.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *riverSystem) Name() string   { return "river" }
func (r *riverSystem) Secret() string { return r.poster.secret }

func (r *riverSystem) Settings() map[string]string {
	return map[string]string{
		"version":           "riverqueue/river v0.51.1, riverpgxv5",
		"MaxWorkers":        strconv.Itoa(r.opts.workers),
		"FetchCooldown":     r.opts.fetchCooldown.String() + " (default 100ms)",
		"FetchPollInterval": r.opts.fetchPollInterval.String() + " (default 1s)",
		"pgxpool MaxConns":  strconv.Itoa(int(r.opts.poolConns)),
		"insert":            "InsertManyFast (COPY), 1,000 jobs per call, InsertOpts.ScheduledAt = due time",
		"why":               "River's docs: lower FetchCooldown/FetchPollInterval for latency (scheduled jobs become available ahead of time and are picked by the next fetch); more workers for throughput",
	}
}

func (r *riverSystem) Schedule(ctx context.Context, run, url string, tasks []task) ([]uuid.UUID, error) {
	const chunk = 1000
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(chunk) - chunk)
				if from >= len(tasks) {
					return
				}
				to := min(from+chunk, len(tasks))
				params := make([]river.InsertManyParams, 0, to-from)
				for _, t := range tasks[from:to] {
					params = append(params, river.InsertManyParams{
						Args:       webhookArgs{URL: url, ID: fmt.Sprintf("%s-%d", run, t.seq), Body: makeBody(run, t.seq, t.due)},
						InsertOpts: &river.InsertOpts{ScheduledAt: t.due},
					})
				}
				if _, err := r.client.InsertManyFast(ctx, params); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("river insert: %w", err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	return nil, firstErr
}

func (r *riverSystem) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.client != nil {
		_ = r.client.Stop(ctx)
	}
	if r.pool != nil {
		r.pool.Close()
	}
	if r.dbURL != "" {
		r.svc.dropDatabase(ctx, r.dbURL)
	}
}

// ---- Asynq ----

type asynqOptions struct {
	concurrency              int
	taskCheckInterval        time.Duration
	delayedTaskCheckInterval time.Duration
}

type asynqSystem struct {
	svc      *services
	opts     asynqOptions
	queue    string
	redisOpt asynq.RedisConnOpt
	server   *asynq.Server
	client   *asynq.Client
	poster   *signedPoster
}

func startAsynq(ctx context.Context, svc *services, opts asynqOptions) (_ *asynqSystem, err error) {
	a := &asynqSystem{svc: svc, opts: opts, queue: svc.runID}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if a.redisOpt, err = asynq.ParseRedisURI(svc.redisURL); err != nil {
		return nil, fmt.Errorf("REDIS_URL for asynq: %w", err)
	}
	if a.poster, err = newSignedPoster(opts.concurrency); err != nil {
		return nil, err
	}
	a.server = asynq.NewServer(a.redisOpt, asynq.Config{
		Concurrency:              opts.concurrency,
		Queues:                   map[string]int{a.queue: 1},
		TaskCheckInterval:        opts.taskCheckInterval,
		DelayedTaskCheckInterval: opts.delayedTaskCheckInterval,
		LogLevel:                 asynq.WarnLevel,
	})
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		var args webhookArgs
		if err := json.Unmarshal(t.Payload(), &args); err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		return a.poster.post(ctx, args)
	})
	if err := a.server.Start(handler); err != nil {
		return nil, fmt.Errorf("asynq server: %w", err)
	}
	a.client = asynq.NewClient(a.redisOpt)
	return a, nil
}

func (a *asynqSystem) Name() string   { return "asynq" }
func (a *asynqSystem) Secret() string { return a.poster.secret }

func (a *asynqSystem) Settings() map[string]string {
	return map[string]string{
		"version":                  "hibiken/asynq v0.26.0",
		"Concurrency":              strconv.Itoa(a.opts.concurrency),
		"TaskCheckInterval":        a.opts.taskCheckInterval.String() + " (default 1s)",
		"DelayedTaskCheckInterval": a.opts.delayedTaskCheckInterval.String() + " (default 5s)",
		"insert":                   "Client.EnqueueContext with ProcessAt(due), 32 goroutines (Asynq has no batch enqueue)",
		"queue":                    "one queue, unique to the run, deleted at the end",
		"why":                      "Asynq's docs: TaskCheckInterval and DelayedTaskCheckInterval set how often pending and scheduled tasks are looked for; lower means lower latency at more Redis load",
		"note":                     "Asynq keeps due times as whole Unix seconds, so a task can run up to 1 s before its due time; the receiver counts those as early",
	}
}

func (a *asynqSystem) Schedule(ctx context.Context, run, url string, tasks []task) ([]uuid.UUID, error) {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) {
					return
				}
				t := tasks[i]
				b, _ := json.Marshal(webhookArgs{URL: url, ID: fmt.Sprintf("%s-%d", run, t.seq), Body: makeBody(run, t.seq, t.due)})
				if _, err := a.client.EnqueueContext(ctx, asynq.NewTask(webhookArgs{}.Kind(), b),
					asynq.Queue(a.queue), asynq.ProcessAt(t.due)); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("asynq enqueue: %w", err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	return nil, firstErr
}

func (a *asynqSystem) Close() {
	if a.server != nil {
		a.server.Shutdown()
	}
	if a.client != nil {
		_ = a.client.Close()
	}
	if a.redisOpt != nil {
		insp := asynq.NewInspector(a.redisOpt)
		_ = insp.DeleteQueue(a.queue, true)
		_ = insp.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a.svc.deleteRedisPrefix(ctx, "asynq:{"+a.queue+"}:")
	}
}

// logWriter sends library logs to hwbench's stderr log.
type logWriter struct{}

func (logWriter) Write(p []byte) (int, error) {
	logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

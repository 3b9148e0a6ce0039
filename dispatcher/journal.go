package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/retry"
)

// answerStore is what the answer journal needs of Redis.
type answerStore interface {
	MarkAnswered(ctx context.Context, answers []model.AnsweredAttempt, ttl time.Duration) error
	AnsweredAttempts(ctx context.Context, claims []model.AttemptClaim) ([]model.AnsweredAttempt, error)
}

// answerJournalConfig configures newAnswerJournal. Every field is required
// unless it says otherwise.
type answerJournalConfig struct {
	Store answerStore
	// Clock times the journal's own fail-open window. Default: the real
	// clock.
	Clock clock.Clock
	// TTL is how long a mark is kept: past the lease of a node that froze
	// or died after the answer, and the heartbeat at which another node
	// recovers its claims (four node TTLs in a Dispatcher).
	TTL time.Duration
	// WriteEvery paces the writes: a write starts at least this long after
	// the one before, so that the marks of a busy node go out in fewer,
	// larger round trips. Zero writes as soon as a write has ended.
	WriteEvery time.Duration
	Logger     *slog.Logger
	Metrics    *metrics
}

// answerJournal keeps each delivery's answer in Redis from the moment the
// sender has it until the attempt is surely recorded or recovered, so that
// a node frozen or killed between a receiver's 2xx and the recorder's
// commit does not have that webhook sent again by the node that recovers
// its claims (store/answers.go). A nil journal (no Redis) keeps nothing.
//
// The senders hand their marks to Run, which writes what gathered while it
// wrote the batch before in one round trip, at most one write every
// WriteEvery; a sender does not wait. A mark
// matters only while its attempt is not committed: once the attempt is,
// its claim is no longer stale and no recovery reads the mark. So whether
// the commit comes before or after the mark changes nothing, and what a
// waiting sender would have bought is only its own place in the batch;
// what it cost was the round trip, with the tenant's share held, on every
// delivery. The window in which a stopped node leaves an answered claim
// unmarked is the time from the answer to the mark's write: a round trip to
// Redis, and on a busy node up to WriteEvery more.
type answerJournal struct {
	cfg answerJournalConfig
	// down skips marks for a while after one failed. It is the journal's
	// own, not the fire-once claims' window: a mark that timed out because
	// this node was frozen in the middle of it says nothing of Redis, and
	// must not make the node claim without Redis for a while.
	down *failopen.Window
	// wake tells Run that marks have gathered.
	wake chan struct{}
	// stop ends Run once it has written what gathered.
	stop chan struct{}

	mu sync.Mutex
	// gathering is the marks the next write takes.
	gathering []model.AnsweredAttempt
	// writing is whether Run takes the marks: before it starts and once it
	// has stopped, each sender writes its own.
	writing bool
}

func newAnswerJournal(cfg answerJournalConfig) *answerJournal {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &answerJournal{cfg: cfg, down: failopen.New(failopen.Config{Clock: cfg.Clock}),
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// markTimeout bounds a write's wait for Redis, and so the marks that gather
// meanwhile: a second of deliveries, after which a write that gave up turns
// the journal off for a while. Generous for that reason.
const markTimeout = time.Second

// mark hands a delivery's answer to the journal. It never fails the send.
func (j *answerJournal) mark(a model.AnsweredAttempt) {
	if j == nil || j.down.Skipping() {
		return
	}
	j.mu.Lock()
	if !j.writing {
		j.mu.Unlock()
		j.write([]model.AnsweredAttempt{a})
		return
	}
	j.gathering = append(j.gathering, a)
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default: // Run is already told
	}
}

// Run writes the marks the senders hand it, what gathered at a time, until
// close. It is started before the senders and stopped after them; a mark
// made outside that time is written by its sender.
func (j *answerJournal) Run(context.Context) {
	if j == nil {
		return
	}
	j.mu.Lock()
	j.writing = true
	j.mu.Unlock()
	pace := j.cfg.Clock.NewTimer(time.Hour)
	pace.Stop()
	var (
		batch     []model.AnsweredAttempt
		lastWrite time.Time
	)
	for {
		select {
		case <-j.wake:
		case <-j.stop:
			j.stopWriting(batch)
			return
		}
		if wait := j.cfg.WriteEvery - j.cfg.Clock.Now().Sub(lastWrite); wait > 0 {
			pace.Reset(wait)
			select {
			case <-pace.C():
			case <-j.stop:
				pace.Stop()
				j.stopWriting(batch)
				return
			}
		}
		lastWrite = j.cfg.Clock.Now()
		batch = j.writeGathered(batch)
	}
}

// stopWriting has the senders write their own marks from now on, and
// writes those that gathered.
func (j *answerJournal) stopWriting(batch []model.AnsweredAttempt) {
	j.mu.Lock()
	j.writing = false
	j.mu.Unlock()
	j.writeGathered(batch)
}

// close ends Run.
func (j *answerJournal) close() {
	if j != nil {
		close(j.stop)
	}
}

// writeGathered writes the marks that gathered, swapping in batch, the
// slice written before, for the next marks to gather in; it returns the
// slice it wrote, for the next call.
func (j *answerJournal) writeGathered(batch []model.AnsweredAttempt) []model.AnsweredAttempt {
	j.mu.Lock()
	gathered := j.gathering
	j.gathering = batch[:0]
	j.mu.Unlock()
	if len(gathered) > 0 && !j.down.Skipping() {
		j.write(gathered)
	}
	return gathered
}

func (j *answerJournal) write(answers []model.AnsweredAttempt) {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := j.cfg.Store.MarkAnswered(ctx, answers, j.cfg.TTL); err != nil {
		j.cfg.Metrics.redisErrors.Inc()
		j.down.Failed()
		j.cfg.Logger.Warn("writing answers to the journal in Redis failed; answers go unjournaled for a while",
			"answers", len(answers), "task", answers[0].TaskID, "err", err, "retry_in", j.down.Skip())
	}
}

// answered returns, as attempts to record delivered, the journal's answers
// to these stale claims. Without the journal (or Redis) it returns none and
// the claims are sent again. It asks Redis even while marks are skipped:
// recoveries are rare, and the marks written before the skip are there.
func (j *answerJournal) answered(ctx context.Context, claims []model.RecoveredClaim) []model.AttemptResult {
	if j == nil || len(claims) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*markTimeout)
	defer cancel()
	keys := make([]model.AttemptClaim, len(claims))
	for i, c := range claims {
		keys[i] = model.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.Token}
	}
	answers, err := j.cfg.Store.AnsweredAttempts(ctx, keys)
	if err != nil {
		if ctx.Err() == nil {
			j.cfg.Metrics.redisErrors.Inc()
			j.cfg.Logger.Warn("reading the answer journal failed; the recovered claims are sent again", "err", err)
		}
		return nil
	}
	results := make([]model.AttemptResult, len(answers))
	for i, a := range answers {
		status := a.StatusCode
		results[i] = model.AttemptResult{
			Attempt: model.Attempt{
				TaskID:     a.TaskID,
				Attempt:    a.Attempt,
				StartedAt:  a.StartedAt,
				Duration:   a.Duration,
				StatusCode: &status,
				Outcome:    string(retry.OutcomeSuccess),
			},
			ClaimToken: a.Token,
			Status:     model.StatusDelivered,
			// As the sender measured them: the recovered delivery is
			// metered as its sender would have.
			BytesSent:     a.BytesSent,
			BytesReceived: a.BytesReceived,
		}
	}
	return results
}

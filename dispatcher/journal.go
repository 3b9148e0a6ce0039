package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/retry"
)

// answerStore is what the answer journal needs of Redis.
type answerStore interface {
	MarkAnswered(ctx context.Context, a model.AnsweredAttempt, ttl time.Duration) error
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
	TTL     time.Duration
	Logger  *slog.Logger
	Metrics *metrics
}

// answerJournal keeps each delivery's answer in Redis from the moment the
// sender has it until the attempt is surely recorded or recovered, so that
// a node frozen or killed between a receiver's 2xx and the recorder's
// commit does not have that webhook sent again by the node that recovers
// its claims (store/answers.go). A nil journal (no Redis) keeps nothing.
type answerJournal struct {
	cfg answerJournalConfig
	// down skips marks for a while after one failed. It is the journal's
	// own, not the fire-once claims' window: a mark that timed out because
	// this node was frozen in the middle of it says nothing of Redis, and
	// must not make the node claim without Redis for a while.
	down *failopen.Window
}

func newAnswerJournal(cfg answerJournalConfig) *answerJournal {
	return &answerJournal{cfg: cfg, down: failopen.New(failopen.Config{Clock: cfg.Clock})}
}

// markTimeout bounds a mark's wait for Redis: the sender holds its share
// meanwhile, and a mark that did not make it costs only a duplicate should
// the node stop before the attempt is recorded. Generous, since a mark that
// gives up turns the journal off for a while.
const markTimeout = time.Second

// mark writes a delivery's answer. It never fails the send.
func (j *answerJournal) mark(a model.AnsweredAttempt) {
	if j == nil || j.down.Skipping() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := j.cfg.Store.MarkAnswered(ctx, a, j.cfg.TTL); err != nil {
		j.cfg.Metrics.redisErrors.Inc()
		j.down.Failed()
		j.cfg.Logger.Warn("writing an answer to the journal in Redis failed; answers go unjournaled for a while",
			"task", a.TaskID, "err", err, "retry_in", j.down.Skip())
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

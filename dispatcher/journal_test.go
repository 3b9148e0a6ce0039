package dispatcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// slowAnswers writes to a real Redis, each write only once the test lets
// it: a round trip held open for as long as the test needs, which Redis
// does not do on demand.
type slowAnswers struct {
	answerStore
	writes  chan []model.AnsweredAttempt
	release chan error
	// written has each write's answers once they are in Redis.
	written chan []model.AnsweredAttempt
}

func (s *slowAnswers) MarkAnswered(ctx context.Context, answers []model.AnsweredAttempt, ttl time.Duration) error {
	s.writes <- answers
	if err := <-s.release; err != nil {
		return err
	}
	if err := s.answerStore.MarkAnswered(ctx, answers, ttl); err != nil {
		return err
	}
	s.written <- answers
	return nil
}

func setupJournal(t *testing.T, writeEvery time.Duration) (*answerJournal, *slowAnswers, *clock.Fake) {
	t.Helper()
	slow := &slowAnswers{answerStore: storetest.Redis(t), writes: make(chan []model.AnsweredAttempt, 8),
		release: make(chan error), written: make(chan []model.AnsweredAttempt, 8)}
	// A still clock unless the test moves it: a failure's skip window
	// lasts the whole test.
	fake := clock.NewFake(time.Now())
	j := newAnswerJournal(answerJournalConfig{Store: slow, TTL: time.Minute, WriteEvery: writeEvery,
		Logger: quietLogger(), Metrics: testMetrics(t), Clock: fake})
	return j, slow, fake
}

// runJournal runs j until the test ends or the returned channel's stop;
// the channel closes when Run returns.
func runJournal(t *testing.T, j *answerJournal) <-chan struct{} {
	t.Helper()
	stopped := make(chan struct{})
	go func() { defer close(stopped); j.Run(context.Background()) }()
	// Run takes the marks once it has started: until then a sender writes
	// its own.
	require.Eventually(t, func() bool { j.mu.Lock(); defer j.mu.Unlock(); return j.writing }, 5*time.Second, time.Millisecond)
	t.Cleanup(func() {
		select {
		case <-stopped:
		default:
			j.close()
		}
	})
	return stopped
}

func gathered(j *answerJournal) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.gathering)
}

func answerOf(task uuid.UUID) model.AnsweredAttempt {
	return model.AnsweredAttempt{TaskID: task, Attempt: 1, Token: uuid.New(), StatusCode: 204,
		StartedAt: time.Now().UTC().Truncate(time.Microsecond), Duration: time.Millisecond}
}

func requireJournaled(t *testing.T, j *answerJournal, answers ...model.AnsweredAttempt) {
	t.Helper()
	claims := make([]model.AttemptClaim, len(answers))
	for i, a := range answers {
		claims[i] = model.AttemptClaim{TaskID: a.TaskID, Attempt: a.Attempt, Token: a.Token}
	}
	got, err := j.cfg.Store.AnsweredAttempts(context.Background(), claims)
	require.NoError(t, err)
	require.ElementsMatch(t, answers, got)
}

// TestJournalWritesMarksTogether: a sender hands its mark over without
// waiting for Redis, and the marks that arrive while a batch is written go
// out together in the next round trip.
func TestJournalWritesMarksTogether(t *testing.T) {
	t.Parallel()
	j, slow, _ := setupJournal(t, 0)
	runJournal(t, j)

	first := answerOf(uuid.New())
	j.mark(first) // returns with the write still open
	require.Equal(t, []model.AnsweredAttempt{first}, receive(t, slow.writes))

	// While the first batch's round trip is open, three more senders mark.
	later := []model.AnsweredAttempt{answerOf(uuid.New()), answerOf(uuid.New()), answerOf(uuid.New())}
	for _, a := range later {
		j.mark(a)
	}
	require.Equal(t, len(later), gathered(j), "the later marks gather while the first batch is written")

	slow.release <- nil
	receive(t, slow.written)
	requireJournaled(t, j, first)
	require.ElementsMatch(t, later, receive(t, slow.writes), "the three later marks in one round trip")
	slow.release <- nil
	receive(t, slow.written)
	requireJournaled(t, j, later...)
}

// TestJournalStopWritesWhatGathered: the marks gathered when the journal is
// told to stop are written before Run returns; a mark made before Run
// starts or after it has stopped is written by its sender before mark
// returns.
func TestJournalStopWritesWhatGathered(t *testing.T) {
	t.Parallel()
	j, slow, _ := setupJournal(t, 0)
	markAlone := func() {
		t.Helper()
		a := answerOf(uuid.New())
		done := make(chan struct{})
		go func() { defer close(done); j.mark(a) }()
		require.Equal(t, []model.AnsweredAttempt{a}, receive(t, slow.writes))
		select {
		case <-done:
			t.Fatal("a sender writing its own mark went on before it was written")
		default:
		}
		slow.release <- nil
		receive(t, slow.written)
		receive(t, done)
		requireJournaled(t, j, a)
	}
	markAlone()

	stopped := runJournal(t, j)
	first, last := answerOf(uuid.New()), answerOf(uuid.New())
	j.mark(first)
	receive(t, slow.writes)
	j.mark(last)
	require.Equal(t, 1, gathered(j))
	j.close()
	slow.release <- nil
	receive(t, slow.written)
	require.Equal(t, []model.AnsweredAttempt{last}, receive(t, slow.writes))
	slow.release <- nil
	receive(t, slow.written)
	receive(t, stopped)
	requireJournaled(t, j, first, last)

	markAlone()
}

// TestJournalFailureSkipsMarks: a write that fails turns marks off for a
// while, rather than piling them up for a Redis that does not answer.
func TestJournalFailureSkipsMarks(t *testing.T) {
	t.Parallel()
	j, slow, _ := setupJournal(t, 0)
	runJournal(t, j)
	j.mark(answerOf(uuid.New()))
	receive(t, slow.writes)
	slow.release <- errors.New("redis: connection refused")
	require.Eventually(t, j.down.Skipping, 5*time.Second, time.Millisecond)
	require.Equal(t, 1.0, counterValue(t, j.cfg.Metrics.redisErrors))

	j.mark(answerOf(uuid.New()))
	require.Zero(t, gathered(j), "a mark made while marks are skipped is dropped")
}

// TestJournalPacesWrites: a write starts WriteEvery after the one before at
// the earliest, with every mark made meanwhile.
func TestJournalPacesWrites(t *testing.T) {
	t.Parallel()
	j, slow, fake := setupJournal(t, time.Millisecond)
	runJournal(t, j)

	first := answerOf(uuid.New())
	j.mark(first) // the first write goes at once
	require.Equal(t, []model.AnsweredAttempt{first}, receive(t, slow.writes))
	slow.release <- nil
	receive(t, slow.written)

	later := []model.AnsweredAttempt{answerOf(uuid.New()), answerOf(uuid.New())}
	j.mark(later[0])
	waitTimers(t, fake, 1) // the next write waits for its turn
	j.mark(later[1])
	select {
	case w := <-slow.writes:
		t.Fatalf("written before its turn: %v", w)
	default:
	}
	fake.Advance(time.Millisecond)
	require.ElementsMatch(t, later, receive(t, slow.writes), "both marks in the paced write")
	slow.release <- nil
	receive(t, slow.written)
	requireJournaled(t, j, later...)
}

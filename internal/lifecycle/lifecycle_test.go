package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// journal records what the stages did, in order.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(entry string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, entry)
}

func (j *journal) read() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

// until is a part that notes its start, runs until ctx ends, then notes its
// end.
func (j *journal) until(name string) Part {
	return func(ctx context.Context) {
		j.add(name + " started")
		<-ctx.Done()
		j.add(name + " returned")
	}
}

// runAsync runs stages on a goroutine of their own; the channel is closed
// when Run returns.
func runAsync(ctx context.Context, stages []Stage) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, stages) }()
	return done
}

func TestRunStartsInOrderAndStopsInReverse(t *testing.T) {
	var j journal
	// Each stage's input is closed by its Stop; its part returns when the
	// input is closed, and only then.
	stage := func(name string) Stage {
		input := make(chan struct{})
		started := make(chan struct{})
		return Stage{
			Parts: []Part{func(context.Context) {
				j.add(name + " started")
				close(started)
				<-input
				j.add(name + " returned")
			}},
			// Starting one part at a time makes the start order visible.
			Ready:   started,
			Stop:    func() { j.add(name + " stop"); close(input) },
			Stopped: func() { j.add(name + " stopped") },
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, []Stage{stage("first"), stage("second"), stage("third")})
	require.Eventually(t, func() bool { return len(j.read()) == 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{"first started", "second started", "third started"}, j.read())

	cancel()
	<-done
	require.Equal(t, []string{
		"first started", "second started", "third started",
		"third stop", "third returned", "third stopped",
		"second stop", "second returned", "second stopped",
		"first stop", "first returned", "first stopped",
	}, j.read())
}

func TestRunWaitsForTheWholeStage(t *testing.T) {
	var j journal
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, []Stage{
		{Parts: Times(3, j.until("copy")), Stopped: func() { j.add("first stopped") }},
		{Parts: []Part{j.until("second")}, Stopped: func() { j.add("second stopped") }},
	})
	require.Eventually(t, func() bool { return len(j.read()) == 4 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	// The parts of both stages return together, as ctx ends; the stages
	// are waited for in reverse.
	entries := j.read()
	require.Len(t, entries, 10)
	require.Less(t, indexOf(entries, "second returned"), indexOf(entries, "second stopped"))
	require.Less(t, indexOf(entries, "second stopped"), indexOf(entries, "first stopped"))
	require.Equal(t, "first stopped", entries[9], "all three copies return before their stage has stopped: %v", entries)
}

func TestRunHoldsLaterStagesUntilReady(t *testing.T) {
	var j journal
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, []Stage{
		{Parts: []Part{j.until("first")}, Ready: ready},
		{Parts: []Part{j.until("second")}},
	})
	require.Eventually(t, func() bool { return len(j.read()) == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, []string{"first started"}, j.read(), "the second stage waits for the first to be ready")

	close(ready)
	require.Eventually(t, func() bool { return len(j.read()) == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	require.ElementsMatch(t, []string{"first started", "second started", "first returned", "second returned"}, j.read())
}

func TestRunStartsLaterStagesWhenCtxEndsBeforeReady(t *testing.T) {
	var j journal
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, []Stage{
		{Parts: []Part{j.until("first")}, Ready: make(chan struct{}), Stopped: func() { j.add("first stopped") }},
		{Parts: []Part{j.until("second")}, Stopped: func() { j.add("second stopped") }},
	})
	require.Eventually(t, func() bool { return len(j.read()) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run still waits for a stage that will never be ready")
	}
	entries := j.read()
	require.Contains(t, entries, "second started")
	require.Less(t, indexOf(entries, "second returned"), indexOf(entries, "second stopped"))
	require.Less(t, indexOf(entries, "second stopped"), indexOf(entries, "first stopped"))
	require.Equal(t, "first stopped", entries[len(entries)-1])
}

func TestRunStepStages(t *testing.T) {
	var j journal
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	Run(ctx, []Stage{
		{Stop: func() { j.add("last step") }},
		{Stop: func() { j.add("first step") }, Stopped: func() { j.add("first step done") }},
	})
	require.Equal(t, []string{"first step", "first step done", "last step"}, j.read())
}

func indexOf(entries []string, entry string) int {
	for i, e := range entries {
		if e == entry {
			return i
		}
	}
	return -1
}

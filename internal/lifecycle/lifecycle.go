// Package lifecycle starts a process's background parts in order and stops
// them in reverse, so that the order lives in one list rather than in
// WaitGroups and done channels spread over a Run method. A part that feeds
// another is started after it and stopped before it: nothing is handed to a
// part that has already returned.
//
// Parts stop in one of two ways, and a Stage models both: most return when
// the context ends, and the runner only waits for them; others drain an
// input until it is closed, and their Stage's Stop closes it once every
// later stage has returned, so that nothing is left unread.
package lifecycle

import (
	"context"
	"sync"
)

// Part is one goroutine of a background part. It returns when ctx ends, or
// when its Stage's Stop tells it to.
type Part func(ctx context.Context)

// Stage is a group of parts started together and stopped together.
type Stage struct {
	// Parts each run on a goroutine of their own. A stage may have none: it
	// is then a step of the stop, its Stop and Stopped alone.
	Parts []Part
	// Ready, if set, holds the next stages back until it is closed or the
	// context ends: for a part whose first result the later parts need.
	Ready <-chan struct{}
	// Stop is called once the context has ended and every later stage has
	// stopped, before waiting for Parts: for parts that return when an
	// input is closed rather than when the context ends.
	Stop func()
	// Stopped is called once Parts have returned: what they leave behind is
	// handed on here, to the earlier stages still running.
	Stopped func()
}

// Times is n copies of part, for a part that runs on several goroutines.
func Times(n int, part Part) []Part {
	parts := make([]Part, n)
	for i := range parts {
		parts[i] = part
	}
	return parts
}

// Run starts stages in order, waits for ctx to end, then stops them in
// reverse order and returns when the first stage has stopped.
//
// A stage whose Ready is not closed when ctx ends holds nothing back: the
// later stages are started all the same, so that every stage's Stop finds
// the stages after it started and returned; their parts see ctx ended and
// return at once.
func Run(ctx context.Context, stages []Stage) {
	running := make([]*sync.WaitGroup, len(stages))
	for i, s := range stages {
		running[i] = &sync.WaitGroup{}
		for _, part := range s.Parts {
			running[i].Go(func() { part(ctx) })
		}
		if s.Ready != nil {
			select {
			case <-s.Ready:
			case <-ctx.Done():
			}
		}
	}
	<-ctx.Done()
	for i := len(stages) - 1; i >= 0; i-- {
		if stages[i].Stop != nil {
			stages[i].Stop()
		}
		running[i].Wait()
		if stages[i].Stopped != nil {
			stages[i].Stopped()
		}
	}
}

package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/dispatcher/wheel"
	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// holderConfig configures newHolder. Every field is required.
type holderConfig struct {
	Clock clock.Clock
	// Send takes claims whose instant came.
	Send chan<- *model.ClaimedTask
	// Stopping reports that the dispatcher is stopping: holdUntil then
	// refuses, since what is held is given back once the send wheel stops.
	Stopping func() bool
}

// holder keeps claims taken ahead of their instant (claimed ahead of their
// due time, or waiting for their rate slot) in a timing wheel of its own
// and hands each to the senders when its instant comes.
type holder struct {
	cfg    holderConfig
	timers *wheel.Timers

	mu   sync.Mutex
	held map[uuid.UUID]*model.ClaimedTask
}

func newHolder(cfg holderConfig) *holder {
	h := &holder{cfg: cfg, held: make(map[uuid.UUID]*model.ClaimedTask)}
	h.timers = wheel.NewTimers(wheel.TimersConfig{Clock: cfg.Clock, Fire: h.release})
	return h
}

// Run drives the send wheel until ctx ends.
func (h *holder) Run(ctx context.Context) error {
	return h.timers.Run(ctx)
}

// hold keeps c until its NextAttemptAt.
func (h *holder) hold(c *model.ClaimedTask) {
	h.mu.Lock()
	h.held[c.ID] = c
	h.mu.Unlock()
	h.timers.Schedule(c.ID, *c.NextAttemptAt)
}

// holdUntil moves c's instant to at and keeps it until then. It reports
// false once the dispatcher is stopping: what is held is given back when the
// send wheel has stopped, and a claim held after that would be stranded.
func (h *holder) holdUntil(c *model.ClaimedTask, at time.Time) bool {
	h.mu.Lock()
	if h.cfg.Stopping() {
		h.mu.Unlock()
		return false
	}
	c.NextAttemptAt = &at
	h.held[c.ID] = c
	h.mu.Unlock()
	h.timers.Schedule(c.ID, at)
	return true
}

// release is called by the send wheel when a held claim falls due: it goes
// to a sender.
func (h *holder) release(id uuid.UUID, _ time.Time) {
	h.mu.Lock()
	c, ok := h.held[id]
	delete(h.held, id)
	h.mu.Unlock()
	if ok {
		h.cfg.Send <- c
	}
}

// takeAll empties the holder, for the claims to be given back.
func (h *holder) takeAll() []*model.ClaimedTask {
	h.mu.Lock()
	defer h.mu.Unlock()
	unsent := make([]*model.ClaimedTask, 0, len(h.held))
	for id, c := range h.held {
		unsent = append(unsent, c)
		delete(h.held, id)
	}
	return unsent
}

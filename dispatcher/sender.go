package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
)

// limitsGate decides, at the instant of sending, whether the tenant's
// dispatch limits let a claim go (dispatchlimits.go).
type limitsGate interface {
	admit(c *model.ClaimedTask) (release func(), ok bool)
}

// bodyStore reads the bodies that claims leave out.
type bodyStore interface {
	ClaimedBody(ctx context.Context, id, token uuid.UUID) ([]byte, error)
}

// secretStore reads a tenant's signing secrets as they are now, for a claim
// whose copy may be stale (signingkeys.go).
type secretStore interface {
	SigningSecrets(ctx context.Context, tenantID uuid.UUID) ([]model.SigningSecret, error)
}

// senderConfig configures newSender. Every field is required.
type senderConfig struct {
	// Claimed carries the claims to send; Run returns once it is closed and
	// every send has ended.
	Claimed <-chan *model.ClaimedTask
	// Sends is the context of every send: canceling it interrupts the sends
	// in flight (see interrupted).
	Sends   context.Context
	Shares  *shares
	Targets *targets
	Limits  limitsGate
	Bodies  bodyStore
	Secrets secretStore
	// Transports send webhooks, redialling connections that failed before
	// the request left.
	Transports *transports
	Signer     *signing.Signer
	// Keyring opens the signing secrets.
	Keyring *keyring.Keyring
	// Journal keeps each delivery's answer until it is recorded (nil: none).
	Journal *answerJournal
	// Record hands a finished attempt to the recorders.
	Record func(r model.AttemptResult, then func(err error))
	// Stats counts a finished attempt in its tenant's statistics: the
	// status it leaves the task in, and how late it started.
	Stats func(tenant uuid.UUID, started time.Time, status model.TaskStatus, lateness time.Duration)
	// Defer gives back claims the sender will not send now.
	Defer func(claims []*model.ClaimedTask, until func(i int) time.Time)
	// Settle returns a claim's share of the claim budget once its attempt
	// is written.
	Settle  func(id uuid.UUID)
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Schedule arms the next attempt of a task to retry.
	Schedule func(id uuid.UUID, at time.Time)
	// Stopping reports that the dispatcher is stopping: claims waiting for a
	// share or a target are given back rather than sent.
	Stopping func() bool
	// Fence reports whether a claim may still be sent at now (fence.go);
	// one that may not is given back unsent, just before its request.
	Fence func(c *model.ClaimedTask, now time.Time) bool
	// Held reports whether a tenant's tasks are held (heldTenants): a claim
	// of such a tenant, taken before it was held, is given back unsent,
	// just before its request, as the fence's are. Nil: none.
	Held func(tenant uuid.UUID) bool
	// Paused reports whether a tenant paused a target (heldTenants): a
	// claim to it taken before the pause is given back unsent, uncounted.
	Paused func(tenant uuid.UUID, target string) bool
	// Health is told of each attempt once it is recorded: its tenant, its
	// target, when it finished, whether it succeeded, and its error.
	Health func(tenant uuid.UUID, target string, at time.Time, ok bool, errMsg string)
	// MaxTimeout caps every attempt's timeout, whatever the task asked for
	// when it was created.
	MaxTimeout time.Duration
	// DefaultMaxTimeout is the node's max_timeout for tenants without one
	// of their own; 0 sets none.
	DefaultMaxTimeout time.Duration
	LeaseMargin       time.Duration
	UserAgent         string
	MaxResponseBody   int
	Rand              func() float64
	// Spans makes a span per send and carries its task's trace context to
	// the webhook (tracing.go).
	Spans spans
}

// sender signs and sends claimed tasks, one attempt each, through their
// tenant's share of the senders, their target's send slots and circuit
// breaker, and hands the attempts to the recorders.
//
// Each send runs on a goroutine of its own, started when the claim gets its
// tenant's share (shares.go) and its target's slot (targetslots.go); a claim
// that finds either full waits there without holding a goroutine, and
// whoever finishes a send hands the freed share or slot on. So the
// goroutines are bounded by the shares, and one tenant's receivers that
// never answer hold that tenant's share and no one else's.
type sender struct {
	cfg   senderConfig
	sends sync.WaitGroup
	// responseBuffers holds *bytes.Buffer to read answers into.
	responseBuffers sync.Pool
}

func newSender(cfg senderConfig) *sender {
	if cfg.Held == nil {
		cfg.Held = func(uuid.UUID) bool { return false }
	}
	if cfg.Paused == nil {
		cfg.Paused = func(uuid.UUID, string) bool { return false }
	}
	if cfg.Health == nil {
		cfg.Health = func(uuid.UUID, string, time.Time, bool, string) {}
	}
	return &sender{cfg: cfg}
}

// deferOne gives c back, to wait until notBefore (zero: due as it was).
func (s *sender) deferOne(c *model.ClaimedTask, notBefore time.Time) {
	s.cfg.Defer([]*model.ClaimedTask{c}, func(int) time.Time { return notBefore })
}

// Run takes claims until the channel is closed, then gives back those still
// waiting for a share and waits for the sends in flight.
func (s *sender) Run() {
	for c := range s.cfg.Claimed {
		// Claims to give back are gathered from whatever else is queued and
		// given back together, on a goroutine of their own: the write takes
		// a round trip, and this loop admits every tenant's claims.
		var back []*model.ClaimedTask
		var until []time.Time
		for n := 0; c != nil; n++ {
			switch decision, wait := s.cfg.Shares.admit(c); decision {
			case shareTaken:
				s.start(c)
			case shareFull:
				s.cfg.Metrics.deferrals.WithLabelValues("tenant_busy").Inc()
				back = append(back, c)
				until = append(until, s.cfg.Clock.Now().Add(wait))
			}
			c = nil
			if n+1 < maxAdmitRun {
				select {
				case c = <-s.cfg.Claimed: // nil once closed
				default:
				}
			}
		}
		if len(back) > 0 {
			s.sends.Add(1)
			go func() {
				defer s.sends.Done()
				s.cfg.Defer(back, func(i int) time.Time { return until[i] })
			}()
		}
	}
	if waiting := s.cfg.Shares.takeAll(); len(waiting) > 0 {
		s.cfg.Defer(waiting, asDue)
	}
	s.sends.Wait()
}

// maxAdmitRun bounds the claims Run admits before giving back those it
// must, so a steady stream does not keep them waiting.
const maxAdmitRun = 256

// start sends c, which holds its tenant's share, on a goroutine of its own.
func (s *sender) start(c *model.ClaimedTask) {
	s.sends.Add(1)
	go func() {
		defer s.sends.Done()
		s.sendThroughTarget(c)
	}()
}

// releaseShare gives back c's share and starts the claims it goes to.
func (s *sender) releaseShare(c *model.ClaimedTask, took time.Duration) {
	s.startAll(s.cfg.Shares.release(c, took))
}

// startAll starts the claims a freed share went to, or, when stopping,
// gives them back unsent.
func (s *sender) startAll(admitted []*model.ClaimedTask) {
	if !s.cfg.Stopping() {
		for _, next := range admitted {
			s.start(next)
		}
		return
	}
	// Stopping: give them back unsent, together, and the shares they took
	// with them (which admit no one else: nothing waits once stopping).
	var back []*model.ClaimedTask
	for len(admitted) > 0 {
		next := admitted[0]
		admitted = append(admitted[1:], s.cfg.Shares.release(next, 0)...)
		back = append(back, next)
	}
	if len(back) > 0 {
		s.cfg.Defer(back, asDue)
	}
}

// sendThroughTarget takes a send slot of c's target and sends c, then the
// claims parked for the same target one after the other; or parks c with
// the target when every slot is taken (giving its tenant's share back while
// it waits, and counted with the tenant's waiting claims), or gives it back
// when too many wait already, for the target or for the tenant. So a slow
// target holds at most MaxPerTarget sends, however many of its tasks fall
// due, and a tenant's claims parked behind its slow targets are bounded.
func (s *sender) sendThroughTarget(c *model.ClaimedTask) {
	if s.cfg.Stopping() || s.tooOld(c) {
		// Waited too long for its share to trust its lease, or we are
		// shutting down: give it back unsent rather than send it late.
		s.deferOne(c, time.Time{})
		s.releaseShare(c, 0)
		return
	}
	t := s.cfg.Targets.get(targetKey(c.URL), c.TenantID)
	if t.breaker.State() == gobreaker.StateOpen {
		// Do not park behind a target known to be failing: the wait would
		// hold the tenant's share until its stuck sends time out.
		s.cfg.Metrics.deferrals.WithLabelValues("breaker").Inc()
		s.deferOne(c, s.cfg.Targets.deferUntil(t, s.cfg.Clock.Now()))
		s.releaseShare(c, 0)
		return
	}
	switch decision, wait := s.cfg.Targets.admit(t, c, s.cfg.Shares.mayPark(c)); decision {
	case parked:
		// It waits for its target without its tenant's share, so that a
		// slow target does not hold the tenant's sends to other targets;
		// it takes a share again when a slot is handed to it.
		s.startAll(s.cfg.Shares.park(c))
		return
	case full:
		s.cfg.Metrics.deferrals.WithLabelValues("target_busy").Inc()
		s.deferOne(c, s.cfg.Clock.Now().Add(wait))
		s.releaseShare(c, 0)
		return
	}
	for c != nil {
		started := s.cfg.Clock.Now()
		var took time.Duration
		if sent := s.attemptThrough(t, c); sent {
			// Only a send says how long the target takes.
			took = s.cfg.Clock.Now().Sub(started)
		}
		s.releaseShare(c, took)
		c = s.cfg.Targets.done(t, took)
		c = s.takeOver(t, c)
	}
}

// shed gives back claims their target no longer has room to keep parked
// (targets.watch), claims[i] to come back after waits[i].
func (s *sender) shed(claims []*model.ClaimedTask, waits []time.Duration) {
	for _, c := range claims {
		s.cfg.Shares.unpark(c)
	}
	s.giveBack("target_busy", claims, waits)
}

// giveBack counts claims as deferred for reason and gives them back,
// claims[i] to be claimed again no sooner than waits[i] from now.
func (s *sender) giveBack(reason string, claims []*model.ClaimedTask, waits []time.Duration) {
	s.cfg.Metrics.deferrals.WithLabelValues(reason).Add(float64(len(claims)))
	now := s.cfg.Clock.Now()
	s.cfg.Defer(claims, func(i int) time.Time { return now.Add(waits[i]) })
}

// watchShares gives back, every second until ctx ends, the claims waiting
// beyond their tenant's room, which shrinks when its sends stop finishing
// (shares.trim): they would hold the claim budget until their age gives
// them back.
func (s *sender) watchShares(ctx context.Context) {
	clock.Every(ctx, s.cfg.Clock, watchEvery, func() {
		if claims, waits := s.cfg.Shares.trim(); len(claims) > 0 {
			s.giveBack("tenant_busy", claims, waits)
		}
	})
}

// takeOver decides what becomes of c, parked for target t and just handed
// t's free slot: it is sent (returned) if it gets its tenant's share;
// otherwise the slot goes on to the next parked claim, and c waits for its
// share or is given back.
func (s *sender) takeOver(t *target, c *model.ClaimedTask) *model.ClaimedTask {
	for c != nil {
		s.cfg.Shares.unpark(c)
		if s.cfg.Stopping() || s.tooOld(c) {
			// Parked too long for its lease, or we are shutting down:
			// give it back unsent rather than send it late.
			s.cfg.Metrics.deferrals.WithLabelValues("target_busy").Inc()
			s.deferOne(c, time.Time{})
			c = s.cfg.Targets.done(t, 0)
			continue
		}
		decision, wait := s.cfg.Shares.admit(c)
		switch decision {
		case shareTaken:
			return c
		case shareFull:
			s.cfg.Metrics.deferrals.WithLabelValues("tenant_busy").Inc()
			s.deferOne(c, s.cfg.Clock.Now().Add(wait))
		}
		// Waiting for its share (it comes back through a target slot of its
		// own), or given back: the slot goes on.
		c = s.cfg.Targets.done(t, 0)
	}
	return nil
}

// tooOld reports whether c was claimed so long ago that its lease may run
// out before its send ends: the partition's owner would then hand it back
// and claim it again, and sending this claim too would send the attempt
// twice.
func (s *sender) tooOld(c *model.ClaimedTask) bool {
	return s.cfg.Clock.Now().Sub(c.ClaimedAt) > s.cfg.LeaseMargin/2
}

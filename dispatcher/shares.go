package dispatcher

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// Tenants' shares of the senders. A send holds its sender until the receiver
// answers or the timeout ends, and nothing can take it back sooner: a tenant
// whose receivers accept connections and never answer would, with senders
// handed out first come first served, hold every one of them and stall every
// other tenant's webhooks for as long as its timeouts. So each tenant may
// have at most maxPerTenant claims in the sending stage (sending, or waiting
// for a slot of their target) and maxBytesPerTenant of their bodies in
// memory, and the node at most maxTotal and maxBytes; a tenant's unanswered
// sends use up its own share only. A claim that finds its tenant's share (or
// the node) full waits here, with its tenant, without holding a sender; each
// share given back goes to the next waiting tenant in turn (round robin), so
// when the node is full every waiting tenant gets its turn whatever the
// others have queued. A tenant may always have one claim sending, whatever
// its body's size, so no body is ever too large to be sent.

// sharesConfig configures newShares. Every field is required.
type sharesConfig struct {
	MaxTotal          int
	MaxPerTenant      int
	MaxBytes          int64
	MaxBytesPerTenant int64
	// MaxWaitingPerTenant is the least room a tenant has for claims waiting
	// here or parked with its targets: they hold the node's claim budget,
	// and a tenant whose every send hangs must not use it all. Its room is
	// what its drain earns (drainRoom) up to MaxWaitingDrained, the node's
	// claim budget; and half of that until it has had claims here for
	// drainMeasured, before which its pace is unknown (half, so that a new
	// tenant whose receivers turn out to hang leaves the others half the
	// budget meanwhile). Beyond its room, the surplus is given back. A
	// MaxWaitingDrained of zero (or not above MaxWaitingPerTenant) makes
	// the room MaxWaitingPerTenant always.
	MaxWaitingPerTenant int
	MaxWaitingDrained   int
	// Clock times the stalls and the drain meters. Default: the real clock.
	Clock clock.Clock
}

// tenantShare is one tenant's use of the senders.
type tenantShare struct {
	id      uuid.UUID
	sending int
	bytes   int64
	waiting []*model.ClaimedTask
	// parked counts the tenant's claims parked with a target: they hold no
	// share, but count with waiting against MaxWaitingPerTenant, so that a
	// tenant whose targets never answer cannot fill the claim budget with
	// claims parked behind them.
	parked int
	// sendTime is a moving average of how long the tenant's sends take, to
	// tell a claim given back when a share is likely free.
	sendTime time.Duration
	// drained counts the tenant's sends finished lately, and busySince is
	// when it last came to use the senders (a tenant with nothing sending,
	// waiting or parked is forgotten): they size its waiting room
	// (roomLocked).
	drained   drainMeter
	busySince time.Time
	// queued is set while the tenant is in the round robin of waiters.
	queued bool
}

// shareDecision is what admit decided for a claim.
type shareDecision int

const (
	shareTaken   shareDecision = iota // the claim holds a share: send it
	shareWaiting                      // it waits here until a share frees
	shareFull                         // no room to wait either: give it back
)

// shares hands out tenants' shares of the senders.
type shares struct {
	cfg sharesConfig

	mu       sync.Mutex
	byTenant map[uuid.UUID]*tenantShare
	sending  int
	bytes    int64
	// turns is the round robin of tenants with claims waiting.
	turns []*tenantShare
}

func newShares(cfg sharesConfig) *shares {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &shares{cfg: cfg, byTenant: make(map[uuid.UUID]*tenantShare)}
}

// bodySize is what a claim's body will take in memory while it is sent.
// A claim from Postgres always has its BodySize; the body itself, read
// only when BodySize says nothing, may be being loaded by the goroutine a
// claim was handed to.
func bodySize(c *model.ClaimedTask) int64 {
	if c.BodySize > 0 {
		return int64(c.BodySize)
	}
	return int64(len(c.Body))
}

// fitsLocked reports whether c may take a share of t now.
func (s *shares) fitsLocked(t *tenantShare, c *model.ClaimedTask) bool {
	if t.sending == 0 {
		// Its one claim always goes, if the node has room for it at all.
		return s.sending < s.cfg.MaxTotal && (s.sending == 0 || s.bytes+bodySize(c) <= s.cfg.MaxBytes)
	}
	size := bodySize(c)
	return t.sending < s.cfg.MaxPerTenant && t.bytes+size <= s.cfg.MaxBytesPerTenant &&
		s.sending < s.cfg.MaxTotal && s.bytes+size <= s.cfg.MaxBytes
}

func (s *shares) takeLocked(t *tenantShare, c *model.ClaimedTask) {
	size := bodySize(c)
	t.sending++
	t.bytes += size
	s.sending++
	s.bytes += size
}

func (s *shares) tenantLocked(id uuid.UUID) *tenantShare {
	t, ok := s.byTenant[id]
	if !ok {
		t = &tenantShare{id: id, busySince: s.cfg.Clock.Now()}
		s.byTenant[id] = t
	}
	return t
}

// admit gives c a share of its tenant's, or keeps it waiting for one, or,
// when too many of the tenant's claims wait already, says how long until a
// share is likely free.
func (s *shares) admit(c *model.ClaimedTask) (shareDecision, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(c.TenantID)
	// Claims that came first keep their place: a newcomer does not pass the
	// tenant's waiting claims.
	if len(t.waiting) == 0 && s.fitsLocked(t, c) {
		s.takeLocked(t, c)
		return shareTaken, 0
	}
	if len(t.waiting)+t.parked < s.roomLocked(t) {
		t.waiting = append(t.waiting, c)
		if !t.queued {
			t.queued = true
			s.turns = append(s.turns, t)
		}
		return shareWaiting, 0
	}
	return shareFull, lineWait(len(t.waiting)+1, t.sending, t.sendTime)
}

// trim takes out the claims waiting beyond their tenant's room, which
// shrank since they came (its sends stopped finishing), the newest first
// from the end of each line, claims[i] to come back after waits[i].
func (s *shares) trim() (claims []*model.ClaimedTask, waits []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.turns {
		extra := min(len(t.waiting)+t.parked-s.roomLocked(t), len(t.waiting))
		if extra <= 0 {
			continue
		}
		keep := len(t.waiting) - extra
		for i, c := range t.waiting[keep:] {
			claims = append(claims, c)
			waits = append(waits, lineWait(keep+1+i, t.sending, t.sendTime))
		}
		clear(t.waiting[keep:])
		// A tenant left with none waiting leaves the turns at its next turn.
		t.waiting = t.waiting[:keep]
	}
	return claims, waits
}

// roomLocked is how many of t's claims may wait or be parked.
func (s *shares) roomLocked(t *tenantShare) int {
	if s.cfg.MaxWaitingDrained <= s.cfg.MaxWaitingPerTenant {
		return s.cfg.MaxWaitingPerTenant
	}
	now := s.cfg.Clock.Now()
	if now.Sub(t.busySince) < drainMeasured {
		return max(s.cfg.MaxWaitingPerTenant, s.cfg.MaxWaitingDrained/2)
	}
	return drainRoom(s.cfg.MaxWaitingPerTenant, s.cfg.MaxWaitingDrained, t.drained.recent(now))
}

// release gives back c's share, its send having taken took (0: it was not
// sent), and returns the waiting claims that now hold a share, to be sent.
func (s *shares) release(c *model.ClaimedTask, took time.Duration) []*model.ClaimedTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byTenant[c.TenantID]
	if t == nil {
		return nil
	}
	size := bodySize(c)
	t.sending--
	t.bytes -= size
	s.sending--
	s.bytes -= size
	if took > 0 {
		if t.sendTime == 0 {
			t.sendTime = took
		} else {
			t.sendTime += (took - t.sendTime) / 8
		}
		t.drained.finished(s.cfg.Clock.Now())
	}
	admitted := s.turnLocked()
	s.dropIdleLocked(t)
	return admitted
}

// dropIdleLocked forgets t once it has nothing sending, waiting or parked.
func (s *shares) dropIdleLocked(t *tenantShare) {
	if t.sending == 0 && len(t.waiting) == 0 && t.parked == 0 {
		delete(s.byTenant, t.id)
	}
}

// mayPark reports whether c's tenant may have one more claim parked with a
// target. It checks and does not reserve: concurrent parkers may pass it
// together, which overshoots the bound by at most the sends in flight.
func (s *shares) mayPark(c *model.ClaimedTask) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byTenant[c.TenantID]
	return t == nil || len(t.waiting)+t.parked < s.roomLocked(t)
}

// park gives back c's share as it parks with its target, and returns the
// waiting claims that now hold a share, to be sent.
func (s *shares) park(c *model.ClaimedTask) []*model.ClaimedTask {
	s.mu.Lock()
	t := s.tenantLocked(c.TenantID)
	t.parked++
	s.mu.Unlock()
	return s.release(c, 0)
}

// unpark counts c out of its tenant's parked claims: a target handed it a
// slot, or it is given back.
func (s *shares) unpark(c *model.ClaimedTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(c.TenantID)
	t.parked--
	s.dropIdleLocked(t)
}

// turnLocked hands shares to waiting claims, one tenant's at a time in
// turn, while they fit. A tenant served goes to the back of the line; one
// whose next claim does not fit (its own share is full) is passed over and
// keeps its place.
func (s *shares) turnLocked() []*model.ClaimedTask {
	var admitted []*model.ClaimedTask
	for passed := 0; passed < len(s.turns); {
		t := s.turns[0]
		s.turns[0] = nil
		s.turns = s.turns[1:]
		if len(t.waiting) > 0 && s.fitsLocked(t, t.waiting[0]) {
			c := t.waiting[0]
			t.waiting[0] = nil
			t.waiting = t.waiting[1:]
			s.takeLocked(t, c)
			admitted = append(admitted, c)
			passed = 0
		} else {
			passed++
		}
		if len(t.waiting) > 0 {
			s.turns = append(s.turns, t)
		} else {
			t.queued = false
			passed = max(0, passed-1)
		}
	}
	return admitted
}

// takeAll empties the waiting lines, for the claims to be given back.
func (s *shares) takeAll() []*model.ClaimedTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*model.ClaimedTask
	for _, t := range s.turns {
		all = append(all, t.waiting...)
		t.waiting, t.queued = nil, false
		s.dropIdleLocked(t)
	}
	s.turns = nil
	return all
}

// totals reads the node's sends holding a share, their body bytes and the
// claims waiting for a share, for the gauges.
func (s *shares) totals() (sending int, bytes int64, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.turns {
		waiting += len(t.waiting)
	}
	return s.sending, s.bytes, waiting
}

// ShareStatus is one tenant's use of this node's senders.
type ShareStatus struct {
	TenantID uuid.UUID
	Sending  int
	Bytes    int64
	Waiting  int
}

// statuses reports the tenants using senders now, and the node's totals.
func (s *shares) statuses() (tenants []ShareStatus, sending int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.byTenant {
		tenants = append(tenants, ShareStatus{TenantID: t.id, Sending: t.sending, Bytes: t.bytes, Waiting: len(t.waiting)})
	}
	return tenants, s.sending, s.bytes
}

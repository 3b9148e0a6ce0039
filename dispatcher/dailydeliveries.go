package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// deliveries_per_day: a tenant that has made that many deliveries today (UTC,
// as usage_days counts them, exactly) has its due tasks held: each claim of
// it is given back unsent, due at the next UTC midnight, so no attempt is
// spent and nothing is lost; they go out when the day turns, in due order.
//
// The count is read from Postgres (store.DeliveriesToday, one statement for
// every limited tenant of a claim batch) at most every dailyRefresh per
// tenant, and the claims this node passes meanwhile are added to it. So a
// tenant can pass its limit by what the other nodes send between two reads
// of a node, and by this node's claims in flight at a read (sent, not yet
// recorded): at most a second's worth of its deliveries, a node.

// dailyRefresh is how long a tenant's count of deliveries today is used
// before it is read again.
const dailyRefresh = time.Second

// deliveriesReader reads the day's deliveries (Postgres).
type deliveriesReader interface {
	DeliveriesToday(ctx context.Context, tenantIDs []uuid.UUID) (time.Time, map[uuid.UUID]int64, error)
}

// dayCount is a tenant's deliveries of one day, as read and as passed here
// since.
type dayCount struct {
	// day is the UTC day the count is of: Postgres's, whatever this
	// node's clock says.
	day       time.Time
	delivered int64
	// passed counts the claims let through since the read.
	passed    int64
	fetchedAt time.Time
}

// dailyConfig configures newDailyDeliveries.
type dailyConfig struct {
	Store deliveriesReader
	// Limit is a tenant's resolved deliveries_per_day (0: unlimited).
	Limit   func(tenant uuid.UUID) int
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Defer gives claims back to the queue, claims[i] until until(i).
	Defer func(claims []*model.ClaimedTask, until func(i int) time.Time)
}

// dailyDeliveries holds the claims of tenants past deliveries_per_day.
type dailyDeliveries struct {
	cfg dailyConfig

	mu     sync.Mutex
	counts map[uuid.UUID]*dayCount
}

func newDailyDeliveries(cfg dailyConfig) *dailyDeliveries {
	return &dailyDeliveries{cfg: cfg, counts: make(map[uuid.UUID]*dayCount)}
}

// hold returns the claims that may be sent, and gives back, due at the next
// UTC midnight, those of tenants with no deliveries left today. A count
// that cannot be read lets the claims through: delivery goes on.
func (d *dailyDeliveries) hold(claims []*model.ClaimedTask) []*model.ClaimedTask {
	if d == nil || len(claims) == 0 {
		return claims
	}
	limits := make(map[uuid.UUID]int)
	for _, c := range claims {
		if _, seen := limits[c.TenantID]; !seen {
			limits[c.TenantID] = d.cfg.Limit(c.TenantID)
		}
	}
	now := d.cfg.Clock.Now()
	var stale []uuid.UUID
	d.mu.Lock()
	for id, limit := range limits {
		if limit <= 0 {
			continue
		}
		if e := d.counts[id]; e == nil || now.Sub(e.fetchedAt) >= dailyRefresh || !now.Before(e.day.AddDate(0, 0, 1)) {
			stale = append(stale, id)
		}
	}
	d.mu.Unlock()
	if len(stale) > 0 {
		d.read(stale, now)
	}

	var (
		keep     []*model.ClaimedTask
		held     []*model.ClaimedTask
		midnight []time.Time
	)
	d.mu.Lock()
	for i, c := range claims {
		limit := limits[c.TenantID]
		e := d.counts[c.TenantID]
		ok := limit <= 0 || e == nil || !now.Before(e.day.AddDate(0, 0, 1))
		if !ok && e.delivered+e.passed < int64(limit) {
			e.passed++
			ok = true
		}
		switch {
		case ok && keep != nil:
			keep = append(keep, c)
		case ok:
		default:
			if keep == nil {
				// Most batches hold nothing: they cost no copy.
				keep = append(make([]*model.ClaimedTask, 0, len(claims)), claims[:i]...)
			}
			// Due when the count's day ends, by Postgres's day: a node
			// whose clock is ahead does not hold a tenant a day more.
			held, midnight = append(held, c), append(midnight, e.day.AddDate(0, 0, 1))
		}
	}
	d.mu.Unlock()
	if len(held) == 0 {
		return claims
	}
	d.cfg.Metrics.deferrals.WithLabelValues("deliveries_per_day").Add(float64(len(held)))
	d.cfg.Defer(held, func(i int) time.Time { return midnight[i] })
	return keep
}

// read reads the tenants' counts of today, in one statement.
func (d *dailyDeliveries) read(tenants []uuid.UUID, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	defer cancel()
	day, counts, err := d.cfg.Store.DeliveriesToday(ctx, tenants)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.cfg.Metrics.storeErrors.WithLabelValues("deliveries_today").Inc()
		d.cfg.Logger.Warn("reading tenants' deliveries today failed; using the last known", "tenants", len(tenants), "err", err)
		for _, id := range tenants {
			if e := d.counts[id]; e != nil {
				e.fetchedAt = now // tried again after dailyRefresh
			}
		}
		return
	}
	for _, id := range tenants {
		d.counts[id] = &dayCount{day: day, delivered: counts[id], fetchedAt: now}
	}
	if len(d.counts) > 4*len(tenants)+1024 {
		// Forget tenants not seen for a while, so the map follows the
		// limited tenants that send, not every one ever seen.
		for id, e := range d.counts {
			if now.Sub(e.fetchedAt) > time.Hour {
				delete(d.counts, id)
			}
		}
	}
}

package dispatcher

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// runMembership keeps this node registered and its partition leases
// renewed, every HeartbeatInterval: it learns which partitions it owns, has
// newly gained partitions loaded from the start, and hands back the claims of
// nodes that died in its partitions, so their tasks move here within about
// NodeTTL of the death.
func (d *Dispatcher) runMembership(ctx context.Context, ready chan<- struct{}) {
	t := d.clock.NewTimer(0)
	defer t.Stop()
	var lastOK time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		m, err := d.db.Heartbeat(ctx, d.nodeID, d.cfg.NodeName, d.cfg.NodeTTL)
		now := d.clock.Now()
		switch {
		case err == nil:
			lastOK = now
			d.setOwned(m.Owned)
			d.metrics.liveNodes.Set(float64(m.LiveNodes))
			d.recoverClaims(ctx)
		case ctx.Err() != nil:
			return
		default:
			d.metrics.storeErrors.WithLabelValues("heartbeat").Inc()
			d.logger.Warn("heartbeat failed", "err", err)
			// Our leases run out at NodeTTL: past that, others may own our
			// partitions, so stop claiming in them.
			if now.Sub(lastOK) >= d.cfg.NodeTTL {
				d.setOwned(nil)
			}
		}
		if ready != nil {
			close(ready)
			ready = nil
		}
		t.Reset(d.cfg.HeartbeatInterval)
	}
}

// setOwned records the partitions this node owns and asks the loader to load
// the ones it just gained from the beginning of time.
func (d *Dispatcher) setOwned(owned []int16) {
	var gained []int16
	d.mu.Lock()
	var next [model.Partitions]bool
	for _, p := range owned {
		next[p] = true
		if !d.owned[p] {
			gained = append(gained, p)
		}
	}
	changed := len(gained) > 0 || len(owned) != len(d.ownedList)
	d.owned = next
	d.ownedList = slices.Clone(owned)
	d.mu.Unlock()
	if changed {
		d.metrics.ownedPartitions.Set(float64(len(owned)))
		d.logger.Info("partitions changed", "owned", len(owned), "gained", len(gained))
	}
	if len(gained) > 0 {
		select {
		case d.gained <- gained:
		default:
			// The loader is behind on takeovers: have it read everything.
			select {
			case d.rescan <- struct{}{}:
			default:
			}
		}
	}
}

// ownedPartitions is a copy of the partitions this node owns.
func (d *Dispatcher) ownedPartitions() []int16 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ownedList)
}

// owns reports whether the task belongs to a partition this node owns.
func (d *Dispatcher) owns(id uuid.UUID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owned[model.PartitionOf(id)]
}

// recoverClaims hands back the claims that dead or hung senders hold in our
// partitions, frees their fire-once claims in Redis (the sender is gone;
// the same attempt is sent again from here) and arms their timers.
func (d *Dispatcher) recoverClaims(ctx context.Context) {
	owned := d.ownedPartitions()
	if len(owned) == 0 {
		return
	}
	// Free the dead owners' fire-once claims before taking their tasks
	// back: the other way round, a node dying between the two steps would
	// leave keys that refuse every new claim of those attempts until they
	// expire.
	stale, err := d.db.StaleClaims(ctx, owned, loadPage)
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.storeErrors.WithLabelValues("recover").Inc()
			d.logger.Error("listing stale claims failed", "err", err)
		}
		return
	}
	if len(stale) == 0 {
		return
	}
	d.releaseFireOnce(ctx, stale)
	recovered, err := d.db.RecoverClaims(ctx, owned, loadPage)
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.storeErrors.WithLabelValues("recover").Inc()
			d.logger.Error("recovering claims failed", "err", err)
		}
		return
	}
	if len(recovered) == 0 {
		return
	}
	d.metrics.recovered.Add(float64(len(recovered)))
	d.logger.Warn("recovered tasks whose sender died or hung mid-attempt", "tasks", len(recovered))
	// Claims that went stale since the listing above.
	d.releaseFireOnce(ctx, recovered)
	for _, c := range recovered {
		d.Schedule(c.ID, c.At)
	}
}

// releaseFireOnce frees the Redis fire-once claims of claims whose owner is
// gone (a no-op for any key another sender has since taken).
func (d *Dispatcher) releaseFireOnce(ctx context.Context, claims []store.RecoveredClaim) {
	if d.redis == nil || len(claims) == 0 {
		return
	}
	release := make([]store.AttemptClaim, len(claims))
	for i, c := range claims {
		release[i] = store.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.Token}
	}
	if err := d.redis.ReleaseAttempts(ctx, release); err != nil {
		d.metrics.redisErrors.Inc()
		d.logger.Warn("releasing the fire-once claims of recovered tasks failed", "err", err)
	}
}

package dispatcher

import (
	"context"
	"time"
)

// The steps of a dispatcher's stop that belong to no one part.

// boundSends cuts off the sends still waiting for their answer when
// ShutdownTimeout has passed, unless sendersDone is closed first: they are
// recorded as interrupted, due again at once.
func (d *Dispatcher) boundSends(sendersDone <-chan struct{}) {
	bound := d.cfg.Clock.NewTimer(d.cfg.ShutdownTimeout)
	go func() {
		defer bound.Stop()
		select {
		case <-bound.C():
			d.logger.Warn("shutdown timeout reached: interrupting the sends still in flight")
			d.cancelSends()
		case <-sendersDone:
		}
	}()
}

// leaveCluster frees our partitions for the other nodes.
func (d *Dispatcher) leaveCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.cfg.DB.LeaveNode(ctx, d.nodeID); err != nil {
		d.logger.Warn("leaving the cluster failed; our partitions move when their leases expire", "err", err)
	}
}

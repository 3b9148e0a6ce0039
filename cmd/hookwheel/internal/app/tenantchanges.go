package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// tenantChanged routes a tenant change announced on
// store.TenantNotifyChannel (uuid.Nil: changes may have gone unheard) to
// the parts of the node that keep tenants in memory or act on them.
func (n *Node) tenantChanged(id uuid.UUID) {
	n.tenants.TenantChanged(id)
	n.deleter.Wake()
}

// listenTenants hears tenant changes on a node without a dispatcher, whose
// listener would otherwise hear them, until ctx ends. Without a session to
// listen on (a transaction pooler and no direct URL) keys of a suspended or
// deleted tenant are refused here within KeyCacheTTL instead.
func (n *Node) listenTenants(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.db.Listen(ctx, func() {
			n.tenantChanged(uuid.Nil)
			backoff = 100 * time.Millisecond
		}, model.Listeners{Tenant: n.tenantChanged})
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrNoSession) {
			n.logger.Warn("cannot listen for tenant changes through a transaction pooler: a suspended or deleted tenant's keys work here for up to the key cache's time",
				"key_cache_ttl", n.cfg.KeyCacheTTL)
			return
		}
		n.logger.Warn("listening for tenant changes failed; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

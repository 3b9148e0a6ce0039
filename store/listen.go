package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Listen calls the listeners for each notification on their channels until
// ctx is done or the connection fails. It calls ready once listening on them
// all, so the caller can catch up on what it may have missed before.
//
// Every channel is heard on one connection, a session of its own
// (Config.DirectURL when given): a transaction pooler would accept the LISTEN
// and then hand the server connection that heard it to other clients, so the
// notifications would never arrive. Without a session it returns
// ErrNoSession at once.
func (db *DB) Listen(ctx context.Context, ready func(), l model.Listeners) error {
	if err := db.CheckSession(); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var channels []string
	if l.Due != nil {
		channels = append(channels, DueNotifyChannel)
	}
	if l.Membership != nil {
		channels = append(channels, MembershipNotifyChannel)
	}
	if l.Tenant != nil {
		channels = append(channels, TenantNotifyChannel)
	}
	pooled, err := db.session.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listen connection: %w", err)
	}
	// A LISTENing connection must not go back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	for _, channel := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
			return fmt.Errorf("listen %s: %w", channel, err)
		}
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		switch n.Channel {
		case DueNotifyChannel:
			d, err := parseDueNotification(n.Payload)
			if err != nil {
				db.logger.Warn("ignoring malformed due notification", "payload", n.Payload, "err", err)
				continue
			}
			l.Due(d)
		case MembershipNotifyChannel:
			c, err := parseMembershipNotification(n.Payload)
			if err != nil {
				db.logger.Warn("ignoring malformed membership notification", "payload", n.Payload, "err", err)
				continue
			}
			l.Membership(c)
		case TenantNotifyChannel:
			id, err := uuid.Parse(n.Payload)
			if err != nil {
				db.logger.Warn("ignoring malformed tenant notification", "payload", n.Payload, "err", err)
				continue
			}
			l.Tenant(id)
		}
	}
}

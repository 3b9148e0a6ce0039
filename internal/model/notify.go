package model

import "github.com/google/uuid"

// Listeners are what store.DB.Listen calls for each notification, one function per
// channel; a nil function leaves its channel unheard. They run on the
// listening goroutine, one at a time, and must not block.
type Listeners struct {
	// Due is told of each task announced on store.DueNotifyChannel.
	Due func(DueTask)
	// Membership is told of each change announced on
	// store.MembershipNotifyChannel, the listening node's own included.
	Membership func(MembershipChange)
	// Tenant is told of the id of each tenant whose row changed, announced
	// on store.TenantNotifyChannel.
	Tenant func(uuid.UUID)
}

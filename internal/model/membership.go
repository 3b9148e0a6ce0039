package model

import "github.com/google/uuid"

// Membership is a dispatcher node's view after one heartbeat.
type Membership struct {
	// LiveNodes counts the dispatcher nodes whose heartbeat has not expired,
	// this one included.
	LiveNodes int
	// Live are their ids, in order.
	Live []uuid.UUID
	// Owned are the partitions this node holds a lease on, in order.
	Owned []int16
}

// MembershipEvent is what a MembershipChange announces.
type MembershipEvent string

// The events announced on store.MembershipNotifyChannel.
const (
	// MembershipJoined: a node that was not live registered; every share
	// shrinks.
	MembershipJoined MembershipEvent = "joined"
	// MembershipReleased: a node above its share set partitions free.
	MembershipReleased MembershipEvent = "released"
	// MembershipLeft: a node unregistered and set its partitions free;
	// every share grows.
	MembershipLeft MembershipEvent = "left"
)

// MembershipChange is one announcement on store.MembershipNotifyChannel.
type MembershipChange struct {
	// Node is the node whose statement announced the change.
	Node  uuid.UUID
	Event MembershipEvent
}

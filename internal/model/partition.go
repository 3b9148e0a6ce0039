package model

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Partitions is how many partitions tasks are split into: a task's partition
// is the last byte of its id.
const Partitions = 256

// PartitionOf is the partition of a task, as the tasks.partition column
// computes it.
func PartitionOf(id uuid.UUID) int16 { return int16(id[15]) }

// NewTaskIDIn returns a UUIDv7 whose last byte, and so whose partition, is
// partition; the other random bits stay random. A task made from another
// (a schedule's occurrence, a task's callback) is put in its maker's
// partition, so the node that makes it owns it.
func NewTaskIDIn(partition int16) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("new task id: %w", err)
	}
	id[15] = byte(partition)
	return id, nil
}

// FairShare is how many partitions a node should hold: an even split, the
// remainder going one each to the first nodes in id order, so that every
// live node gets work however many there are.
func FairShare(live []uuid.UUID, nodeID uuid.UUID) int {
	n := max(len(live), 1)
	share := Partitions / n
	if rank := slices.Index(live, nodeID); rank >= 0 && rank < Partitions%n {
		share++
	}
	return share
}

// Node is a live dispatcher node and the partitions whose lease it holds.
type Node struct {
	ID   uuid.UUID
	Name string
	// StartedAt is its first heartbeat; it is dead once ExpiresAt passes
	// without another.
	StartedAt, HeartbeatAt, ExpiresAt time.Time
	// Partitions are those it holds a live lease on, ascending.
	Partitions []int16
}

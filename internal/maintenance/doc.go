// Package maintenance holds the dispatcher's upkeep: the Purger, which
// deletes what retention no longer keeps (finished tasks with their
// attempts, remembered idempotency keys, old audit entries), and the
// StatsRecorder, which adds up what the attempts did for GET /v1/stats.
//
// Neither is on the road of a task. They run beside the hot path on timers
// of their own and write to Postgres in batches, so they live apart from the
// parts that fire tasks: the dispatcher's package keeps to claiming and
// sending, and these can be read and tested without it. The dispatcher
// still builds them, tells them what only it knows (whether this node holds
// partition 0's lease, and each attempt as the sender finishes it), and
// orders their start and stop with its other parts. This package knows
// nothing of the dispatcher or of store: each part takes Postgres through
// the small interface it declares (PurgerStore, StatsStore).
package maintenance

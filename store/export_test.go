package store

import "github.com/jackc/pgx/v5/pgxpool"

// The tests live in package store_test: they need storetest, which
// imports this package, so an in-package test would be an import cycle. This
// file lends them what they need of the package's insides.

// QueryListDue is the exact SQL that ListDue runs, for EXPLAIN.
const QueryListDue = queryListDue

// EveryPartition lists every partition.
func EveryPartition() []int16 { return everyPartition() }

// Pool is the DB's connection pool, for tests that set up or inspect rows in SQL.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// QueryClaimTasks, QueryLockOrderingKeys and QueryRecordAttempts are the
// exact SQL of ClaimTasks (its two statements) and RecordAttempts, for
// EXPLAIN.
const (
	QueryClaimTasks       = queryClaimTasks
	QueryLockOrderingKeys = queryLockOrderingKeys
	QueryRecordAttempts   = queryRecordAttempts
)

// QueryPurgeFinished and QueryOldestFinished are the exact SQL of
// PurgeFinished and OldestFinished, for EXPLAIN.
const (
	QueryPurgeFinished  = queryPurgeFinished
	QueryOldestFinished = queryOldestFinished
)

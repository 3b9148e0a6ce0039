package main

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ownershipSample is who held each partition's live lease at one instant.
type ownershipSample struct {
	at    time.Time
	owner [partitions]uuid.UUID // uuid.Nil: no live lease
}

// ownershipWatch samples the partitions table every 50 ms: the heartbeat
// runs every 300 ms, so a lease moving is seen within a sixth of that.
type ownershipWatch struct {
	pool      *pgxpool.Pool
	samples   []ownershipSample // written by run only; read once it has returned
	peakConns int
}

func (w *ownershipWatch) sample(ctx context.Context) (ownershipSample, error) {
	before := time.Now()
	rows, err := w.pool.Query(ctx, "SELECT id, owner FROM partitions WHERE owner IS NOT NULL AND lease_expires_at > now()")
	if err != nil {
		return ownershipSample{}, err
	}
	var (
		s     ownershipSample
		p     int16
		owner uuid.UUID
	)
	_, err = pgx.ForEachRow(rows, []any{&p, &owner}, func() error {
		if p >= 0 && p < partitions {
			s.owner[p] = owner
		}
		return nil
	})
	// The middle of the query stands for when Postgres read the leases.
	s.at = before.Add(time.Since(before) / 2)
	return s, err
}

func (w *ownershipWatch) run(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var lastConns time.Time
	for {
		if s, err := w.sample(ctx); err == nil {
			w.samples = append(w.samples, s)
		}
		if time.Since(lastConns) >= time.Second {
			lastConns = time.Now()
			var c int
			if err := w.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()").Scan(&c); err == nil {
				w.peakConns = max(w.peakConns, c)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// counts is how many partitions each node holds in s, and how many none.
func counts(s ownershipSample) (map[uuid.UUID]int, int) {
	c := map[uuid.UUID]int{}
	unowned := 0
	for _, o := range s.owner {
		if o == uuid.Nil {
			unowned++
		} else {
			c[o]++
		}
	}
	return c, unowned
}

// settled: every partition leased, by exactly nodes nodes, each holding an
// even share give or take one (the remainder goes one each to some nodes).
func settled(s ownershipSample, nodes int) bool {
	c, unowned := counts(s)
	if unowned > 0 || len(c) != nodes {
		return false
	}
	lo, hi := partitions/nodes, (partitions+nodes-1)/nodes
	for _, k := range c {
		if k < lo || k > hi {
			return false
		}
	}
	return true
}

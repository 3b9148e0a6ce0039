package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

type backlogResult struct {
	Rate      int           `json:"rate_per_s"`
	DurationS float64       `json:"duration_s"`
	Seeding   []seedStep    `json:"seeding"`
	Runs      []*lateResult `json:"runs"`
}

type seedStep struct {
	Rows     int64   `json:"rows"`
	Seconds  float64 `json:"seconds"`
	RowsPerS float64 `json:"rows_per_s"`
}

// backlog runs tasks falling due at rate for dur with 0 and then each size
// of backlog pending a month ahead, and reports lateness and the node's RSS.
func backlog(ctx context.Context, svc *services, hwOpts hookwheelOptions, recv *receiver, sizes []int64, rate int, dur time.Duration) (*backlogResult, error) {
	h, err := startHookwheel(ctx, svc, hwOpts, "backlog")
	if err != nil {
		return nil, err
	}
	defer h.Close()
	res := &backlogResult{Rate: rate, DurationS: dur.Seconds()}
	pid := h.nodes[0].pid()
	run := func(rows int64) error {
		r, err := runLateness(ctx, h, recv, lateSpec{
			scenario: "backlog", label: fmt.Sprintf("backlog=%d", rows),
			tasks: int(float64(rate) * dur.Seconds()), spread: dur, rssPID: pid,
		})
		if err != nil {
			return err
		}
		r.BacklogRows = rows
		r.WheelTimers = scrapeMetric(h.nodes[0].base, "hookwheel_wheel_timers")
		res.Runs = append(res.Runs, r)
		return nil
	}
	if err := run(0); err != nil {
		return res, err
	}
	// A template task a month ahead, made through the API; the backlog is
	// copies of its row (new ids, spread over the following month).
	far := time.Now().Add(30 * 24 * time.Hour)
	ids, err := h.Schedule(ctx, "template", recv.url, []task{{seq: 0, due: far}})
	if err != nil {
		return res, err
	}
	var have int64
	for _, size := range sizes {
		if size > have {
			t0 := time.Now()
			if err := seedBacklog(ctx, h, ids[0], have, size); err != nil {
				return res, err
			}
			secs := time.Since(t0).Seconds()
			res.Seeding = append(res.Seeding, seedStep{Rows: size - have, Seconds: secs, RowsPerS: math.Round(float64(size-have) / secs)})
			have = size
		}
		pause(ctx)
		if err := run(have); err != nil {
			return res, err
		}
	}
	return res, nil
}

// seedBacklog inserts rows (from, to] as copies of the template task, due a
// month or more ahead, straight into Postgres (the API would take hours for
// ten million), then refreshes planner statistics.
func seedBacklog(ctx context.Context, h *hookwheelSystem, template uuid.UUID, from, to int64) error {
	rows, err := h.pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'tasks' AND is_generated = 'NEVER' ORDER BY ordinal_position`)
	if err != nil {
		return err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var names, exprs []string
	for _, c := range cols {
		expr := "t." + pgx.Identifier{c}.Sanitize()
		switch c {
		case "id":
			expr = "gen_random_uuid()"
		case "run_at", "next_attempt_at":
			expr = "now() + interval '30 days' + (g % 2592000) * interval '1 second'"
		case "created_at", "updated_at":
			expr = "now()"
		case "idempotency_key", "request_hash":
			expr = "NULL"
		case "status":
			expr = "'scheduled'"
		}
		names = append(names, pgx.Identifier{c}.Sanitize())
		exprs = append(exprs, expr)
	}
	q := fmt.Sprintf(`INSERT INTO tasks (%s) SELECT %s FROM tasks t CROSS JOIN generate_series($2::bigint, $3::bigint) AS g WHERE t.id = $1`,
		strings.Join(names, ", "), strings.Join(exprs, ", "))
	const chunk = 250_000
	start := time.Now()
	for lo := from + 1; lo <= to; lo += chunk {
		hi := min(lo+chunk-1, to)
		if _, err := h.pool.Exec(ctx, q, template, lo, hi); err != nil {
			return fmt.Errorf("seed backlog: %w", err)
		}
		done := hi - from
		logf("backlog: %d/%d rows inserted (%.0f rows/s)", done, to-from, float64(done)/time.Since(start).Seconds())
	}
	if _, err := h.pool.Exec(ctx, "ANALYZE tasks"); err != nil {
		return err
	}
	// Write the seeded pages out now rather than in a checkpoint during the run.
	_, _ = h.pool.Exec(ctx, "CHECKPOINT")
	return nil
}

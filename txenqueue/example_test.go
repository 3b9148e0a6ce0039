package txenqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookwheel/hookwheel/txenqueue"
)

// An order and the webhook that cancels it if unpaid 30 minutes later are
// written in one transaction: both commit, or neither does. It needs a
// database that hookwheel's nodes use, so it is compiled, not run; the
// package's tests make the same calls against a real one.
func ExampleClient_Insert() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // the database hookwheel uses
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	hooks, err := txenqueue.New(txenqueue.Config{
		// The tenant's id, from `hookwheel tenant create` or GET /v1/me.
		TenantID: uuid.MustParse(os.Getenv("HOOKWHEEL_TENANT_ID")),
	})
	if err != nil {
		log.Fatal(err)
	}

	createOrder := func(id int64, fail bool) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES ($1, 'created')`, id); err != nil {
				return err
			}
			task, err := hooks.Insert(ctx, tx, txenqueue.Task{
				URL:            "https://shop.example/hooks/cancel-unpaid",
				Body:           fmt.Appendf(nil, `{"order": %d}`, id),
				Headers:        map[string]string{"Content-Type": "application/json"},
				Delay:          30 * time.Minute,
				IdempotencyKey: fmt.Sprintf("cancel-unpaid-%d", id),
			})
			if err != nil {
				return err // rolls back the order too
			}
			log.Printf("order %d: webhook %s due at %s once this commits", id, task.ID, task.RunAt)
			if fail {
				// Anything that fails from here rolls back both: the
				// webhook is never sent.
				return errors.New("payment provider unreachable")
			}
			return nil // commits both: the dispatchers hear of the task now
		})
	}

	if err := createOrder(42, false); err != nil {
		log.Fatal(err)
	}
	err = createOrder(43, true)
	var invalid *txenqueue.ValidationError
	switch {
	case errors.As(err, &invalid):
		for _, f := range invalid.Fields {
			log.Printf("%s %s", f.Field, f.Message)
		}
	case err != nil:
		log.Printf("order 43 rolled back, with its webhook: %v", err)
	}
}

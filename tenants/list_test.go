package tenants_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestList: tenants come oldest first, page after page, with their
// settings as Get reads them.
func TestList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := tenants.New(tenants.Config{Store: storetest.DB(t)})
	var want []uuid.UUID
	for _, name := range []string{"acme", "globex", "initech"} {
		created, err := svc.Create(ctx, name, model.ActorCLI)
		require.NoError(t, err)
		want = append(want, created.Tenant.ID)
	}
	retention := 72 * time.Hour
	_, err := svc.SetRetention(ctx, want[1], &retention, model.ActorCLI)
	require.NoError(t, err)

	var got []uuid.UUID
	var after *uuid.UUID
	for range len(want) + 1 {
		page, err := svc.List(ctx, after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, s := range page {
			got = append(got, s.ID)
			read, err := svc.Get(ctx, s.ID)
			require.NoError(t, err)
			require.Equal(t, *read, s.Tenant)
			require.Zero(t, s.WaitingTasks)
		}
		after = &page[len(page)-1].ID
	}
	require.Equal(t, want, got)
}

package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// newInvite stores an invite whose code is code, expiring at expires.
func newInvite(t *testing.T, ctx context.Context, db *store.DB, code string, expires time.Time) *model.Invite {
	t.Helper()
	sum := sha256.Sum256([]byte(code))
	inv := &model.Invite{ID: uuid.Must(uuid.NewV7()), CodeHash: sum[:], Prefix: code[:6], Note: "for " + code,
		CreatedBy: model.ActorOperator, ExpiresAt: expires}
	require.NoError(t, db.CreateInvite(ctx, inv, model.AuditEntry{Actor: model.ActorOperator, Action: "invite.created"}))
	return inv
}

func hashOf(code string) []byte {
	sum := sha256.Sum256([]byte(code))
	return sum[:]
}

// TestRedeemInviteOnceUnderConcurrency: many sign-ups racing for one code,
// each on a connection of its own, redeem it exactly once; the others are
// told it is used.
func TestRedeemInviteOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	for round := range 5 {
		code := "race-" + randomHex(t, 8)
		newInvite(t, ctx, db, code, time.Now().Add(time.Hour))

		const racers = 16
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, racers)
			got   = make([]*model.Invite, racers)
		)
		for i := range racers {
			wg.Go(func() {
				<-start
				got[i], errs[i] = db.RedeemInvite(ctx, hashOf(code))
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
				require.NotNil(t, got[i].UsedAt)
			case errors.Is(err, model.ErrInviteUsed):
			default:
				t.Fatalf("round %d, racer %d: %v", round, i, err)
			}
		}
		require.Equal(t, 1, won, "round %d: the code must redeem exactly once", round)
		require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM invites WHERE code_hash = $1 AND used_at IS NOT NULL`, hashOf(code)))
	}
}

func TestRedeemInviteRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)

	_, err := db.RedeemInvite(ctx, hashOf("never-made"))
	require.ErrorIs(t, err, model.ErrInviteUnknown)

	expired := newInvite(t, ctx, db, "expired-"+randomHex(t, 4), time.Now().Add(time.Hour))
	exec(t, pool, `UPDATE invites SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)
	_, err = db.RedeemInvite(ctx, expired.CodeHash)
	require.ErrorIs(t, err, model.ErrInviteExpired)

	// Redeemed, released after a failed sign-up, redeemed again, completed:
	// from then on it is used, and cannot be released or revoked.
	inv := newInvite(t, ctx, db, "good-"+randomHex(t, 4), time.Now().Add(time.Hour))
	first, err := db.RedeemInvite(ctx, inv.CodeHash)
	require.NoError(t, err)
	require.Equal(t, inv.ID, first.ID)
	require.Equal(t, inv.Prefix, first.Prefix)
	require.Nil(t, first.UsedBy)
	_, err = db.RedeemInvite(ctx, inv.CodeHash)
	require.ErrorIs(t, err, model.ErrInviteUsed)
	require.NoError(t, db.ReleaseInvite(ctx, inv.ID))
	_, err = db.RedeemInvite(ctx, inv.CodeHash)
	require.NoError(t, err, "released: usable again")

	tenant := createTenant(t, db)
	require.NoError(t, db.CompleteInvite(ctx, inv.ID, tenant.ID,
		model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorSignup, Action: "tenant.signed_up"}))
	require.NoError(t, db.ReleaseInvite(ctx, inv.ID))
	_, err = db.RedeemInvite(ctx, inv.CodeHash)
	require.ErrorIs(t, err, model.ErrInviteUsed, "a completed invite is never released")
	require.Error(t, db.CompleteInvite(ctx, inv.ID, uuid.New(), model.AuditEntry{Actor: model.ActorSignup, Action: "tenant.signed_up"}),
		"used_by is set once")

	_, err = db.RevokeInvite(ctx, inv.ID, nil)
	require.ErrorIs(t, err, model.ErrConflict, "a used invite is kept")
	_, err = db.RevokeInvite(ctx, uuid.New(), nil)
	require.ErrorIs(t, err, model.ErrNotFound)

	list, err := db.ListInvites(ctx, nil, 10)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, inv.ID, list[0].ID, "newest first")
	require.Equal(t, tenant.ID, *list[0].UsedBy)
	older, err := db.ListInvites(ctx, &inv.ID, 10)
	require.NoError(t, err)
	require.Len(t, older, 1)
	require.Equal(t, expired.ID, older[0].ID)

	revoked, err := db.RevokeInvite(ctx, expired.ID, func(i *model.Invite) *model.AuditEntry {
		return &model.AuditEntry{Actor: model.ActorOperator, Action: "invite.revoked", Detail: map[string]any{"prefix": i.Prefix}}
	})
	require.NoError(t, err)
	require.Equal(t, expired.Prefix, revoked.Prefix)
	_, err = db.RedeemInvite(ctx, expired.CodeHash)
	require.ErrorIs(t, err, model.ErrInviteUnknown, "a revoked code is no code")
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'invite.revoked' AND detail->>'prefix' = $1`, expired.Prefix))
}

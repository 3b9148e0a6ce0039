package tenants_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

func TestParseSignupMode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]tenants.SignupMode{"": tenants.SignupOff, "off": tenants.SignupOff,
		" Invite ": tenants.SignupInvite, "open": tenants.SignupOpen} {
		got, err := tenants.ParseSignupMode(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"on", "true", "invites"} {
		_, err := tenants.ParseSignupMode(bad)
		require.Error(t, err, bad)
	}
}

func TestCheckSignupName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "Acme Inc.", "Zürich – 東京", strings.Repeat("n", tenants.MaxSignupName)} {
		require.NoError(t, tenants.CheckSignupName(ok), ok)
	}
	for _, bad := range []string{"", " a", "a ", "a\nb", "a\x00b", "a\u200bb", "a\u202eb", "\xff",
		strings.Repeat("n", tenants.MaxSignupName+1)} {
		var fe *tenants.FieldError
		require.ErrorAs(t, tenants.CheckSignupName(bad), &fe, "%q", bad)
		require.Equal(t, "name", fe.Field)
	}
}

// failingTenants is a tenant store whose creates fail.
type failingTenants struct{ tenants.Store }

func (failingTenants) CreateTenant(context.Context, *model.Tenant, *model.APIKey, model.AuditEntry) error {
	return errors.New("database gone")
}

// TestSignUpGivesTheCodeBackWhenNoTenantIsMade: a sign-up that redeemed a
// code and then failed to make its tenant leaves the code usable.
func TestSignUpGivesTheCodeBackWhenNoTenantIsMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.DB(t)
	failing := tenants.NewSignup(tenants.SignupConfig{Mode: tenants.SignupInvite, Store: db,
		Tenants: tenants.New(tenants.Config{Store: failingTenants{db}})})
	inv, err := failing.CreateInvite(ctx, 0, "", model.ActorCLI)
	require.NoError(t, err)
	_, err = failing.SignUp(ctx, tenants.SignupRequest{Name: "acme", InviteCode: inv.Code})
	require.ErrorContains(t, err, "database gone")

	working := tenants.NewSignup(tenants.SignupConfig{Mode: tenants.SignupInvite, Store: db, Tenants: tenants.New(tenants.Config{Store: db})})
	created, err := working.SignUp(ctx, tenants.SignupRequest{Name: "acme", InviteCode: inv.Code, Client: "203.0.113.1"})
	require.NoError(t, err, "the code was given back")
	list, err := working.ListInvites(ctx, nil, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, created.Tenant.ID, *list[0].UsedBy)
	_, err = working.SignUp(ctx, tenants.SignupRequest{Name: "again", InviteCode: inv.Code})
	require.ErrorIs(t, err, model.ErrInviteUsed)
	var _ tenants.InviteStore = (*store.DB)(nil)
}

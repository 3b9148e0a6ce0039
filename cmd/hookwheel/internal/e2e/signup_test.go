package e2e_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestSignupAnswersAsDocumented walks sign-up and the invites through the
// clients that check every answer against openapi.yaml, refusals included,
// on a node whose sign-up needs invites; the new tenant's key works on
// another node.
func TestSignupAnswersAsDocumented(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Signup = tenants.SignupInvite })
	other := e.startNode(func(c *app.Config) { c.DisableDispatcher = true })
	ctx := context.Background()
	admin := clientFor(t, n.base, "admin-token")
	anyone := clientFor(t, n.base, "")
	status := func(want int, got int, body []byte, what string) {
		t.Helper()
		require.Equal(t, want, got, "%s: %s", what, body)
	}

	mode, err := anyone.GetSignupWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, mode.StatusCode(), mode.Body, "getSignup")
	require.Equal(t, openapi.SignupModeInvite, mode.JSON200.Mode)
	offMode, err := clientFor(t, other.base, "").GetSignupWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, openapi.SignupModeOff, offMode.JSON200.Mode, "a node left at its default")

	inv, err := admin.CreateInviteWithResponse(ctx, openapi.InviteCreateRequest{ExpiresIn: ptr("1h"), Note: ptr("for acme")})
	require.NoError(t, err)
	status(http.StatusCreated, inv.StatusCode(), inv.Body, "createInvite")
	badTTL, err := admin.CreateInviteWithResponse(ctx, openapi.InviteCreateRequest{ExpiresIn: ptr("9999h")})
	require.NoError(t, err)
	status(http.StatusUnprocessableEntity, badTTL.StatusCode(), badTTL.Body, "createInvite with too long a time")

	noCode, err := anyone.SignUpWithResponse(ctx, openapi.SignupRequest{Name: "acme"})
	require.NoError(t, err)
	status(http.StatusForbidden, noCode.StatusCode(), noCode.Body, "signUp without a code")
	badName, err := anyone.SignUpWithResponse(ctx, openapi.SignupRequest{Name: " acme"})
	require.NoError(t, err)
	status(http.StatusUnprocessableEntity, badName.StatusCode(), badName.Body, "signUp with a bad name")
	signed, err := anyone.SignUpWithResponse(ctx, openapi.SignupRequest{Name: "acme", InviteCode: &inv.JSON201.InviteCode})
	require.NoError(t, err)
	status(http.StatusCreated, signed.StatusCode(), signed.Body, "signUp")
	offSignup, err := clientFor(t, other.base, "").SignUpWithResponse(ctx, openapi.SignupRequest{Name: "acme"})
	require.NoError(t, err)
	status(http.StatusNotFound, offSignup.StatusCode(), offSignup.Body, "signUp where it is off")

	me, err := clientFor(t, other.base, signed.JSON201.APIKey).GetCallerWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, me.StatusCode(), me.Body, "getCaller with the signed-up key, on another node")
	require.Equal(t, signed.JSON201.Tenant.ID, me.JSON200.Tenant.ID)

	list, err := admin.ListInvitesWithResponse(ctx, &openapi.ListInvitesParams{Limit: ptr(10)})
	require.NoError(t, err)
	status(http.StatusOK, list.StatusCode(), list.Body, "listInvites")
	require.Len(t, list.JSON200.Data, 1)
	require.Equal(t, openapi.InviteStatusUsed, list.JSON200.Data[0].Status)
	used, err := admin.RevokeInviteWithResponse(ctx, inv.JSON201.ID)
	require.NoError(t, err)
	status(http.StatusConflict, used.StatusCode(), used.Body, "revokeInvite of a used one")
	unused, err := admin.CreateInviteWithResponse(ctx, openapi.InviteCreateRequest{})
	require.NoError(t, err)
	revoked, err := admin.RevokeInviteWithResponse(ctx, unused.JSON201.ID)
	require.NoError(t, err)
	status(http.StatusNoContent, revoked.StatusCode(), revoked.Body, "revokeInvite")
	gone, err := admin.RevokeInviteWithResponse(ctx, uuid.New())
	require.NoError(t, err)
	status(http.StatusNotFound, gone.StatusCode(), gone.Body, "revokeInvite of none")
	wrong, err := clientFor(t, n.base, "not-the-token").ListInvitesWithResponse(ctx, nil)
	require.NoError(t, err)
	status(http.StatusUnauthorized, wrong.StatusCode(), wrong.Body, "listInvites with a wrong token")
}

package hookwheel

import (
	"context"
	"fmt"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// Signing up, where the server allows it (HOOKWHEEL_SIGNUP): not a
// tenant's call, since whoever signs up has no credential yet. The
// operator's invites are the admin API's, which the SDK leaves out.

type (
	// SignupResult is a signed-up tenant with its API key and signing
	// secret, which the server shows only in this answer.
	SignupResult = apiclient.SignupCreated
	// Tenant is a tenant and its settings.
	Tenant = apiclient.Tenant
)

// The sign-up modes SignupMode returns.
const (
	SignupOff    = string(apiclient.SignupModeOff)
	SignupInvite = string(apiclient.SignupModeInvite)
	SignupOpen   = string(apiclient.SignupModeOpen)
)

// SignupMode asks the server at baseURL whether tenants may sign up:
// SignupOff, SignupInvite (with an invite code) or SignupOpen.
func SignupMode(ctx context.Context, baseURL string, opts ...Option) (string, error) {
	api, err := newAPI(baseURL, "", opts)
	if err != nil {
		return "", err
	}
	resp, err := api.GetSignupWithResponse(repeatable(ctx))
	if err != nil {
		return "", fmt.Errorf("get sign-up mode: %w", err)
	}
	info, err := result("get sign-up mode", resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return "", err
	}
	return string(info.Mode), nil
}

// SignUp makes a tenant named name on the server at baseURL, with
// inviteCode where the server needs one (SignupInvite; ignored by an open
// server). The answer holds the only copy of its API key and signing
// secret. A server with sign-up off answers ErrNotFound; a missing, unknown,
// used or expired code is ErrForbidden (Error.Type says which); too many
// sign-ups from this address ErrRateLimited. Not retried after a 503 or a
// network error: had the first try made the tenant, a repeat would make a
// second, or find the code used.
func SignUp(ctx context.Context, baseURL, name, inviteCode string, opts ...Option) (*SignupResult, error) {
	api, err := newAPI(baseURL, "", opts)
	if err != nil {
		return nil, err
	}
	body := apiclient.SignupRequest{Name: name}
	if inviteCode != "" {
		body.InviteCode = &inviteCode
	}
	op := fmt.Sprintf("sign up %q", name)
	resp, err := api.SignUpWithResponse(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON201)
}

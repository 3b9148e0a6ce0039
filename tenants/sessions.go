package tenants

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Dashboard sign-ins and sign-outs go in the audit log, each with the
// address it came from: a tenant's in its own log, named by the key it
// signed in with; the operator's in the installation's. A refused sign-in
// with a key that exists (a wrong secret, a revoked or an expired key) is
// recorded in that key's tenant's log: it is someone holding the key's id,
// which is not public. One with a key id that names no key, or with a wrong
// admin token, is recorded nowhere: it has no tenant to be told, and anyone
// could fill the installation's log with them; the failed-auth throttle
// and hookwheel_api_auth_failures_total count those.

// Audit actions of dashboard sessions.
const (
	AuditSignedIn     = "session.signed_in"
	AuditSignInFailed = "session.sign_in_failed"
	AuditSignedOut    = "session.signed_out"
)

// SignIn authenticates apiKey as Authenticate does, for a dashboard
// session opened from address client, and records the sign-in in the
// tenant's audit log; a refusal of a key that exists is recorded there too,
// then ErrUnauthenticated returned. A sign-in whose record fails, fails.
func (s *Service) SignIn(ctx context.Context, apiKey, client string) (*Caller, error) {
	caller, refused, why, err := s.authenticate(ctx, apiKey)
	if refused != nil {
		entry := sessionEntry(&refused.Tenant.ID, refused.Actor(), AuditSignInFailed, client)
		entry.Detail["reason"] = why
		if err := s.store.RecordAudit(ctx, entry); err != nil {
			return nil, fmt.Errorf("sign in: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := s.store.RecordAudit(ctx, sessionEntry(&caller.Tenant.ID, caller.Actor(), AuditSignedIn, client)); err != nil {
		return nil, fmt.Errorf("sign in: %w", err)
	}
	return caller, nil
}

// OperatorSignedIn records the operator's sign-in, with the admin token
// already checked, from address client.
func (s *Service) OperatorSignedIn(ctx context.Context, client string) error {
	if err := s.store.RecordAudit(ctx, sessionEntry(nil, model.ActorOperator, AuditSignedIn, client)); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	return nil
}

// SignedOut records the end of a valid session from address client: a
// tenant's (tenantID and the key it signed in with), or, with a nil
// tenantID and an empty keyID, the operator's.
func (s *Service) SignedOut(ctx context.Context, tenantID *uuid.UUID, keyID, client string) error {
	actor := model.ActorOperator
	if tenantID != nil {
		actor = model.KeyActor(keyID)
	}
	if err := s.store.RecordAudit(ctx, sessionEntry(tenantID, actor, AuditSignedOut, client)); err != nil {
		return fmt.Errorf("sign out: %w", err)
	}
	return nil
}

func sessionEntry(tenantID *uuid.UUID, actor, action, client string) model.AuditEntry {
	return model.AuditEntry{TenantID: tenantID, Actor: actor, Action: action, Detail: map[string]any{"ip": client}}
}

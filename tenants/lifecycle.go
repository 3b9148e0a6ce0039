package tenants

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// ErrTenantSuspended refuses a valid key, or session, of a suspended
// tenant: unlike ErrUnauthenticated, the caller is told why.
var ErrTenantSuspended = errors.New("the tenant is suspended")

// tenantAdmits says whether calls of t's keys are admitted: a suspended
// tenant's are refused as such, a deleted tenant's keys are no keys.
func tenantAdmits(t *model.Tenant) error {
	switch t.Status {
	case model.TenantSuspended:
		return ErrTenantSuspended
	case model.TenantDeleting:
		return ErrUnauthenticated
	}
	return nil
}

// The audit actions of a tenant's life.
const (
	AuditSuspended        = "tenant.suspended"
	AuditResumed          = "tenant.resumed"
	AuditDeletionAsked    = "tenant.deletion_requested"
	AuditDeletionFinished = "tenant.deleted"
)

// Suspend refuses a tenant's calls (ErrTenantSuspended, at once on every
// node: the change is announced to them as it commits) and holds its
// tasks: the dispatchers claim none of them until it is resumed, and its
// schedules keep adding occurrences on their times. Suspending a suspended
// tenant changes nothing; a tenant being deleted cannot be suspended
// (model.ErrConflict).
func (s *Service) Suspend(ctx context.Context, id uuid.UUID, actor string) (*model.Tenant, error) {
	return s.changed(s.store.SetTenantStatus(ctx, id, model.TenantSuspended,
		[]model.TenantStatus{model.TenantActive}, s.audit(id, actor, AuditSuspended, nil)))
}

// Resume undoes Suspend: the tenant's keys work again and every
// dispatcher sends its tasks that fell due meanwhile. Resuming an active
// tenant changes nothing; a tenant being deleted cannot be resumed
// (model.ErrConflict).
func (s *Service) Resume(ctx context.Context, id uuid.UUID, actor string) (*model.Tenant, error) {
	return s.changed(s.store.SetTenantStatus(ctx, id, model.TenantActive,
		[]model.TenantStatus{model.TenantSuspended}, s.audit(id, actor, AuditResumed, nil)))
}

// Delete starts a tenant's deletion, from any status: its keys are refused
// at once on every node (ErrUnauthenticated), its tasks held, and a
// Deleter removes its rows in the background, its own row last; the audit
// entries and usage rows of the tenant stay. Asking again changes nothing.
func (s *Service) Delete(ctx context.Context, id uuid.UUID, actor string) (*model.Tenant, error) {
	return s.changed(s.store.SetTenantStatus(ctx, id, model.TenantDeleting,
		[]model.TenantStatus{model.TenantActive, model.TenantSuspended}, s.audit(id, actor, AuditDeletionAsked, nil)))
}

// TenantChanged drops this node's cached keys of a tenant whose row
// changed on some node (the listener hears it on store.TenantNotifyChannel),
// so that a suspension, a deletion or new limits apply here as the change
// commits rather than KeyCacheTTL later. uuid.Nil, when changes may have
// gone unheard (the listener reconnected), drops every cached key.
func (s *Service) TenantChanged(id uuid.UUID) {
	if id == uuid.Nil {
		s.keys.forgetAll()
		return
	}
	s.keys.forgetTenant(id)
}

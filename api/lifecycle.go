package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
)

// tenantSuspended is the answer to every call of a suspended tenant's keys
// and sessions.
func tenantSuspended() *problem {
	return newProblem(http.StatusForbidden, "tenant-suspended", "Tenant suspended",
		"this tenant is suspended; its calls are refused until the operator resumes it")
}

// SuspendTenant suspends a tenant (tenants.Service.Suspend has the rules).
func (s *Server) SuspendTenant(c echo.Context, id openapi.TenantID) error {
	return s.changeTenantStatus(c, id, http.StatusOK, s.tenants.Suspend)
}

// ResumeTenant ends a tenant's suspension.
func (s *Server) ResumeTenant(c echo.Context, id openapi.TenantID) error {
	return s.changeTenantStatus(c, id, http.StatusOK, s.tenants.Resume)
}

// DeleteTenant starts a tenant's deletion, which the deleter finishes in
// the background.
func (s *Server) DeleteTenant(c echo.Context, id openapi.TenantID) error {
	return s.changeTenantStatus(c, id, http.StatusAccepted, s.tenants.Delete)
}

func (s *Server) changeTenantStatus(c echo.Context, id uuid.UUID, status int,
	change func(ctx context.Context, id uuid.UUID, actor string) (*model.Tenant, error),
) error {
	t, err := change(c.Request().Context(), id, model.ActorOperator)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return notFound("tenant " + id.String())
	case errors.Is(err, model.ErrConflict) && t != nil:
		return newProblem(http.StatusConflict, "tenant-"+string(t.Status), "Tenant "+string(t.Status),
			"tenant "+id.String()+" is being deleted; it can no longer be suspended or resumed")
	case err != nil:
		return err
	}
	return c.JSON(status, TenantJSON(t))
}

func tenantStatusJSON(s model.TenantStatus) openapi.TenantStatus {
	if s == "" {
		return openapi.TenantStatusActive
	}
	return openapi.TenantStatus(s)
}

func tenantDeletionJSON(d *model.TenantDeletion) *openapi.TenantDeletion {
	if d == nil {
		return nil
	}
	deleted := d.Deleted
	if deleted == nil {
		deleted = map[string]int64{}
	}
	return &openapi.TenantDeletion{RequestedAt: d.RequestedAt, Deleted: deleted}
}

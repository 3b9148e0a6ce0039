package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
)

// The tenant's own settings: the part of its configuration it sets itself,
// where the operator sets the rest (PATCH /v1/admin/tenants/{id}).

// settingsUpdate is the body of PATCH /v1/settings: each field absent is
// kept, null clears it, a value is set.
type settingsUpdate struct {
	// OperationsURL, when given, is where the tenant's operations events
	// go; null: nowhere.
	OperationsURL json.RawMessage `json:"operations_url"`
}

// GetSettings shows the calling tenant's settings.
func (s *Server) GetSettings(c echo.Context) error {
	caller, err := tenantOf(c)
	if err != nil {
		return err
	}
	// Read afresh: the caller's tenant comes from the key cache, which on
	// another node than the one that took a change may predate it.
	t, err := s.tenants.Get(c.Request().Context(), caller.ID)
	if err != nil {
		return settingsError(err, caller.ID.String())
	}
	return c.JSON(http.StatusOK, settingsJSON(t))
}

// UpdateSettings changes the calling tenant's settings, checked as the
// operator's changes to the same fields are.
func (s *Server) UpdateSettings(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	var req settingsUpdate
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := caller.Tenant.ID
	// The URL is checked against the tenant's granted ranges as they are
	// now, not as the key cache last saw them.
	t, err := s.tenants.Get(ctx, id)
	if err != nil {
		return settingsError(err, id.String())
	}
	if req.OperationsURL != nil {
		var fe fieldErrors
		opsURL := s.parseOperationsURL(&fe, req.OperationsURL, t)
		if err := fe.problem(); err != nil {
			return err
		}
		if t, err = s.tenants.SetOperationsURL(ctx, id, opsURL, caller.Actor()); err != nil {
			return settingsError(err, id.String())
		}
	}
	return c.JSON(http.StatusOK, settingsJSON(t))
}

// settingsError answers a tenant deleted since its key was checked as any
// other tenant that is gone.
func settingsError(err error, id string) error {
	if errors.Is(err, model.ErrNotFound) {
		return notFound("tenant " + id)
	}
	return err
}

func settingsJSON(t *model.Tenant) openapi.TenantSettings {
	return openapi.TenantSettings{OperationsURL: t.OperationsURL}
}

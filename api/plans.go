package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// The operator's plans: named sets of limits that tenants are put on.

// PutPlan creates a plan or replaces its limits.
func (s *Server) PutPlan(c echo.Context, name openapi.PlanName) error {
	var req limitsRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrors
	if !tenants.ValidPlanName(name) {
		fe.add("name", "must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit")
	}
	limits := req.validate(&fe, "", s.cfg.Limits.MaxTimeout)
	if err := fe.problem(); err != nil {
		return err
	}
	p, created, err := s.tenants.PutPlan(c.Request().Context(), model.Plan{Name: name, Limits: limits}, model.ActorOperator)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, planJSON(p))
}

// ListPlans lists every plan.
func (s *Server) ListPlans(c echo.Context) error {
	plans, err := s.tenants.ListPlans(c.Request().Context())
	if err != nil {
		return err
	}
	out := openapi.PlanList{Data: make([]openapi.Plan, len(plans))}
	for i := range plans {
		out.Data[i] = planJSON(&plans[i])
	}
	return c.JSON(http.StatusOK, out)
}

// GetPlan reads a plan.
func (s *Server) GetPlan(c echo.Context, name openapi.PlanName) error {
	p, err := s.tenants.GetPlan(c.Request().Context(), name)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("plan " + name)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planJSON(p))
}

// DeletePlan deletes a plan no tenant is on.
func (s *Server) DeletePlan(c echo.Context, name openapi.PlanName) error {
	err := s.tenants.DeletePlan(c.Request().Context(), name, model.ActorOperator)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return notFound("plan " + name)
	case errors.Is(err, model.ErrPlanInUse):
		return newProblem(http.StatusConflict, "plan-in-use", "Plan in use",
			"plan "+name+" has tenants on it: move them to another plan, or to none, first")
	case err != nil:
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func planJSON(p *model.Plan) openapi.Plan {
	return openapi.Plan{Name: p.Name, Limits: overridesJSON(p.Limits), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// noSuchPlan is the problem of a tenant given a plan that does not exist.
func noSuchPlan(plan string) error {
	var fe fieldErrors
	fe.add("plan", "names no plan (%q); create it with PUT /v1/admin/plans/{name} first", plan)
	return fe.problem()
}

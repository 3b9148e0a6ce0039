package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// Target pauses: POST /v1/targets/pause and /resume, GET /v1/targets/paused.

// targetPauseRequest is the body of a pause as sent, targetResumeRequest
// a resume's, which has no reason.
type (
	targetPauseRequest struct {
		Target string `json:"target"`
		Reason string `json:"reason"`
	}
	targetResumeRequest struct {
		Target string `json:"target"`
	}
)

// decodeTarget reads a pause's or resume's body and returns its target as
// the dispatcher keys it, its reason, or a problem.
func decodeTarget(c echo.Context, withReason bool) (string, string, error) {
	var req targetPauseRequest
	if withReason {
		if err := decodeJSON(c, &req); err != nil {
			return "", "", err
		}
	} else {
		var resume targetResumeRequest
		if err := decodeJSON(c, &resume); err != nil {
			return "", "", err
		}
		req.Target = resume.Target
	}
	var fe fieldErrors
	target := ""
	if req.Target == "" {
		fe.add("target", "is required: \"https://host:port\"")
	} else {
		target = tasks.CheckTargetKey(&fe, "target", req.Target)
	}
	if len(req.Reason) > tasks.MaxPauseReason {
		fe.add("reason", "must be at most %d bytes", tasks.MaxPauseReason)
	}
	if err := fe.problem(); err != nil {
		return "", "", err
	}
	return target, req.Reason, nil
}

// PauseTarget holds the calling tenant's tasks to a target.
func (s *Server) PauseTarget(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	target, reason, err := decodeTarget(c, true)
	if err != nil {
		return err
	}
	p, created, err := s.tasks.PauseTarget(c.Request().Context(), tenant.ID, target, reason, actorOf(c))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, targetPauseJSON(p))
}

// ResumeTarget lifts the calling tenant's pause of a target.
func (s *Server) ResumeTarget(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	target, _, err := decodeTarget(c, false)
	if err != nil {
		return err
	}
	p, err := s.tasks.ResumeTarget(c.Request().Context(), tenant.ID, target, actorOf(c))
	if errors.Is(err, model.ErrNotFound) {
		return notFound("pause of target " + target)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, targetPauseJSON(p))
}

// ListPausedTargets lists the calling tenant's paused targets.
func (s *Server) ListPausedTargets(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	ps, err := s.tasks.ListPausedTargets(c.Request().Context(), tenant.ID)
	if err != nil {
		return err
	}
	out := openapi.TargetPauseList{Data: make([]openapi.TargetPause, len(ps))}
	for i, p := range ps {
		out.Data[i] = targetPauseJSON(p)
	}
	return c.JSON(http.StatusOK, out)
}

func targetPauseJSON(p *model.TargetPause) openapi.TargetPause {
	out := openapi.TargetPause{
		Target:    p.Target,
		PausedAt:  p.PausedAt.UTC(),
		PausedBy:  openapi.TargetPausePausedBy(p.PausedBy),
		Reason:    p.Reason,
		LastError: p.LastError,
	}
	if p.Since != nil {
		since := p.Since.UTC()
		out.Since = &since
	}
	return out
}

package api

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// bulkEditMember is the edit of a bulk replay as sent, noting whether the
// member was given at all and whether as null.
type bulkEditMember struct {
	edit        bulkEditRequest
	given, null bool
}

type bulkEditRequest struct {
	URLPrefix *urlPrefixMove   `json:"url_prefix"`
	Headers   *headerEditBySet `json:"headers"`
}

type urlPrefixMove struct {
	From *string `json:"from"`
	To   *string `json:"to"`
}

type headerEditBySet struct {
	Set    map[string]string `json:"set"`
	Remove []string          `json:"remove"`
}

// Each level decodes as strictly as the outer decoder, naming an unknown
// field by its path ("edit.url_prefix.form").
func (m *bulkEditMember) UnmarshalJSON(b []byte) error {
	m.given = true
	if bytes.Equal(bytes.TrimSpace(b), jsonNull) {
		m.null = true
		return nil
	}
	return decodeNested("edit", b, &m.edit)
}

func (u *urlPrefixMove) UnmarshalJSON(b []byte) error {
	type plain urlPrefixMove
	return decodeNested("url_prefix", b, (*plain)(u))
}

func (h *headerEditBySet) UnmarshalJSON(b []byte) error {
	type plain headerEditBySet
	return decodeNested("headers", b, (*plain)(h))
}

// checkBulkEdit turns the edit as sent into the edit to apply, by the rules
// of package tasks; nil when none was given.
func (s *Server) checkBulkEdit(fe *fieldErrors, m bulkEditMember, tenant *model.Tenant) *model.BulkEdit {
	switch {
	case !m.given:
		return nil
	case m.null:
		fe.add("edit", "must not be null: leave it out to replay the tasks as they are")
		return nil
	}
	req := tasks.BulkEditRequest{}
	if p := m.edit.URLPrefix; p != nil {
		req.URLPrefixGiven, req.URLFrom, req.URLTo = true, p.From, p.To
	}
	if h := m.edit.Headers; h != nil {
		req.HeadersGiven, req.SetHeaders, req.RemoveHeaders = true, h.Set, h.Remove
	}
	edit := s.rules().CheckBulkEdit(fe, req, tenant)
	return &edit
}

// editReplayTasks answers a bulk replay with an edit.
func (s *Server) editReplayTasks(c echo.Context, tenant *model.Tenant, f model.ReplayFilter, edit model.BulkEdit, dryRun bool) error {
	res, err := s.tasks.EditReplayMatching(c.Request().Context(), tenant, f, edit, s.rules(), dryRun, actorOf(c))
	var quota *tasks.QuotaError
	switch {
	case errors.As(err, &quota):
		return s.quotaExceeded(c, quota)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, editReplayJSON(res, dryRun))
}

// editReplayJSON is the answer to a bulk replay with an edit: the counts
// always, the refusals when there are any, the sample of changes on a dry
// run that would change any task.
func editReplayJSON(res *tasks.EditReplayResult, dryRun bool) openapi.ReplayResult {
	out := openapi.ReplayResult{Matched: res.Matched, Replayed: res.Replayed, Changed: &res.Changed, Refused: &res.Refused}
	for _, r := range res.Refusals {
		ids := r.TaskIDs
		if ids == nil {
			ids = []openapi.TaskID{}
		}
		out.Refusals = append(out.Refusals, openapi.ReplayRefusal{Reason: r.Reason, Count: r.Count, TaskIds: ids})
	}
	if dryRun {
		for _, c := range res.Sample {
			out.Sample = append(out.Sample, openapi.ReplayChange{ID: c.ID, URLBefore: c.URLBefore, URLAfter: c.URLAfter,
				HeadersSet: c.SetHeaders, HeadersRemoved: c.RemovedHeaders})
		}
	}
	return out
}

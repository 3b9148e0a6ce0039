package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// replayRequest is the optional body of POST /v1/tasks/{id}/replay, as
// sent: the fields of a task request that a replay may change.
type replayRequest struct {
	URL     *string           `json:"url"`
	Method  *string           `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    *bodyText         `json:"body"`
	Labels  map[string]string `json:"labels"`

	Callback        *string `json:"callback"`
	FailureCallback *string `json:"failure_callback"`
}

// ReplayTask schedules a dead or delivered task again, due now, with the same
// webhook-id and Idempotency-Key, its attempts continuing their count and a
// fresh retry budget; the fields its body gives replace the task's own first.
func (s *Server) ReplayTask(c echo.Context, id openapi.TaskID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	edit, err := s.decodeReplayEdit(c, tenant)
	if err != nil {
		return err
	}
	t, err := s.tasks.Replay(c.Request().Context(), tenant, id, edit)
	var (
		conflict *tasks.ConflictError
		quota    *tasks.QuotaError
	)
	switch {
	case errors.As(err, &quota):
		return s.quotaExceeded(c, quota)
	case errors.Is(err, model.ErrNotFound):
		return notFound("task " + id.String())
	case errors.Is(err, tasks.ErrCallbackOfCallback):
		var fe fieldErrors
		for _, cb := range []struct {
			field string
			url   *string
		}{{"callback", edit.Callback}, {"failure_callback", edit.FailureCallback}} {
			if cb.url != nil && *cb.url != "" {
				fe.add(cb.field, "cannot be given to a callback task: a callback's outcome is reported to no one")
			}
		}
		return fe.problem()
	case errors.As(err, &conflict):
		return newProblem(http.StatusConflict, "not-replayable", "Task cannot be replayed",
			"task "+id.String()+" is "+string(conflict.Task.Status)+"; only dead and delivered tasks can be replayed")
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, taskJSON(t))
}

// decodeReplayEdit reads the body of a replay into the edit it asks for:
// nil for no body (which replays the task as it is), else each field
// checked by the rules of creation.
func (s *Server) decodeReplayEdit(c echo.Context, tenant *model.Tenant) (*model.TaskEdit, error) {
	// Read whole first, to tell no body from a malformed one; the body
	// limit bounds what this holds.
	raw, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, err // the body limit's 413, or the connection's failure
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var req replayRequest
	if err := decodeJSONFrom(bytes.NewReader(raw), &req); err != nil {
		return nil, err
	}
	var fe fieldErrors
	// A null would read as absent, keeping the task's own: refused, so
	// that "headers": null meant as "no headers" is not silently ignored.
	var given map[string]json.RawMessage
	_ = json.Unmarshal(raw, &given) // decoded above: an object or null
	for _, field := range []string{"url", "method", "headers", "body", "labels", "callback", "failure_callback"} {
		if v, ok := given[field]; ok && bytes.Equal(v, jsonNull) {
			fe.add(field, "must not be null: leave it out to keep the task's own")
		}
	}
	edit := &model.TaskEdit{}
	if req.URL != nil {
		if u := s.rules().CheckURL(&fe, "url", *req.URL, tenant); u != "" {
			edit.URL = &u
		}
	}
	if req.Method != nil {
		m := tasks.CheckMethod(&fe, *req.Method)
		edit.Method = &m
	}
	if req.Headers != nil {
		edit.Headers = tasks.CheckHeaders(&fe, req.Headers)
	}
	if req.Body != nil {
		if body, ok := req.Body.bytes(&fe); ok {
			edit.Body = s.rules().CheckBody(&fe, body)
		}
	}
	if req.Labels != nil {
		// Kept even when empty: an empty object clears the labels.
		addLabelErrors(&fe, tasks.CheckLabels("labels", req.Labels))
		edit.Labels = req.Labels
	}
	// "" removes a callback; anything else is checked as at creation.
	for _, cb := range []struct {
		field string
		given *string
		edit  **string
	}{{"callback", req.Callback, &edit.Callback}, {"failure_callback", req.FailureCallback, &edit.FailureCallback}} {
		switch {
		case cb.given == nil:
		case *cb.given == "":
			*cb.edit = cb.given
		default:
			*cb.edit = s.rules().CheckCallback(&fe, cb.field, cb.given, tenant)
		}
	}
	if err := fe.problem(); err != nil {
		return nil, err
	}
	return edit, nil
}

// replayTasksRequest is the body of POST /v1/tasks/replay, as sent: values
// stay strings so that each bad one is reported by name.
type replayTasksRequest struct {
	ScheduleID    *string         `json:"schedule_id,omitempty"`
	PublishID     *string         `json:"publish_id,omitempty"`
	Topic         *string         `json:"topic,omitempty"`
	URL           *string         `json:"url,omitempty"`
	Labels        labelConditions `json:"labels"`
	CreatedAfter  *string         `json:"created_after,omitempty"`
	CreatedBefore *string         `json:"created_before,omitempty"`
	DryRun        *bool           `json:"dry_run,omitempty"`
	Edit          bulkEditMember  `json:"edit"`
}

// labelConditions are the labels of a bulk replay's filter as sent, noting
// whether the member was given at all: an empty object or a null decodes to
// no labels, as leaving it out does, but says something else.
type labelConditions struct {
	labels map[string]string
	given  bool
}

func (l *labelConditions) UnmarshalJSON(raw []byte) error {
	l.given = true
	return json.Unmarshal(raw, &l.labels)
}

// ReplayTasks replays every dead task of the tenant that matches all the
// conditions given, or with dry_run only counts them; with an edit, changes
// each first (or with dry_run says what it would change).
func (s *Server) ReplayTasks(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var req replayTasksRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var (
		fe     fieldErrors
		filter model.ReplayFilter
	)
	filter.ScheduleID = parseScheduleIDField(&fe, req.ScheduleID)
	filter.PublishID, filter.Topic = parsePublishFields(&fe, req.PublishID, req.Topic)
	checkURLPrefix(&fe, "url", req.URL)
	filter.URLPrefix = req.URL
	if req.Labels.given && len(req.Labels.labels) == 0 {
		// No label is no condition: every dead task would match, which
		// "labels": {} meant as a filter must not replay.
		fe.add("labels", "must hold at least one label; leave it out for no condition")
	}
	addLabelErrors(&fe, tasks.CheckLabels("labels", req.Labels.labels))
	filter.Labels = req.Labels.labels
	filter.CreatedAfter = parseTimeField(&fe, "created_after", req.CreatedAfter)
	filter.CreatedBefore = parseTimeField(&fe, "created_before", req.CreatedBefore)
	checkCreatedRange(&fe, filter.CreatedAfter, filter.CreatedBefore)
	edit := s.checkBulkEdit(&fe, req.Edit, tenant)
	if err := fe.problem(); err != nil {
		return err
	}
	dryRun := req.DryRun != nil && *req.DryRun
	if edit != nil {
		return s.editReplayTasks(c, tenant, filter, *edit, dryRun)
	}
	matched, replayed, err := s.tasks.ReplayMatching(c.Request().Context(), tenant, filter, dryRun, actorOf(c))
	var quota *tasks.QuotaError
	switch {
	case errors.As(err, &quota):
		return s.quotaExceeded(c, quota)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, openapi.ReplayResult{Matched: matched, Replayed: replayed})
}

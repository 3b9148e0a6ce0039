package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// CreateTask schedules one webhook.
func (s *Server) CreateTask(c echo.Context, params openapi.CreateTaskParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	task, err := s.decodeTask(c, tenant, params.IdempotencyKey)
	if err != nil {
		return err
	}
	if task.Topic != nil {
		return s.publish(c, tenant, task)
	}
	res, err := s.tasks.Create(c.Request().Context(), tenant, task)
	var (
		quota *tasks.QuotaError
		daily *tasks.DailyQuotaError
	)
	switch {
	case errors.As(err, &quota):
		return s.quotaExceeded(c, quota)
	case errors.As(err, &daily):
		return s.dailyQuotaExceeded(c, daily)
	case errors.Is(err, tasks.ErrKeyReused):
		return newProblem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency-Key reused",
			"this Idempotency-Key was already used by a different request; use a new key for a new task")
	case err != nil:
		return err
	case res.Replayed:
		c.Response().Header().Set("Idempotent-Replayed", "true")
		return c.JSON(http.StatusOK, taskJSON(res.Task))
	}
	traceTask(c, res.Task)
	c.Response().Header().Set(echo.HeaderLocation, "/v1/tasks/"+res.Task.ID.String())
	return c.JSON(http.StatusCreated, taskJSON(res.Task))
}

// decodeTask reads the body of POST /v1/tasks and its Idempotency-Key
// into the task to store, or the problem to answer: all that CreateTask does
// before the task service.
func (s *Server) decodeTask(c echo.Context, tenant *model.Tenant, idempotencyKey *string) (*model.Task, error) {
	var req taskRequest
	if err := decodeJSON(c, &req); err != nil {
		return nil, err
	}
	checked := req.request()
	checked.IdempotencyKey, checked.IdempotencyKeyField = idempotencyKey, "Idempotency-Key"
	task, err := s.checkTask(checked, tenant, s.clock.Now())
	if err != nil {
		return nil, err
	}
	if task.IdempotencyKey != nil {
		task.RequestHash = requestHash(&req)
	}
	return task, nil
}

// GetTask reads one task.
func (s *Server) GetTask(c echo.Context, id openapi.TaskID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	t, err := s.tasks.Get(c.Request().Context(), tenant.ID, id)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("task " + id.String())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskJSON(t))
}

// ListTasks pages through the tenant's tasks, newest first.
func (s *Server) ListTasks(c echo.Context, params openapi.ListTasksParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var (
		fe     fieldErrors
		filter model.TaskFilter
	)
	filter.Limit, filter.Before = pageRequest(&fe, params.Limit, params.Cursor)
	if params.Status != nil {
		if !params.Status.Valid() {
			fe.add("status", "must be one of scheduled, dispatching, retrying, delivered, dead, canceled, expired")
		}
		status := model.TaskStatus(*params.Status)
		filter.Status = &status
	}
	filter.ScheduleID = params.ScheduleID
	filter.PublishID = params.PublishID
	if params.Topic != nil {
		tasks.CheckTopicName(&fe, "topic", *params.Topic)
	}
	filter.Topic = params.Topic
	filter.CreatedAfter, filter.CreatedBefore = params.CreatedAfter, params.CreatedBefore
	checkCreatedRange(&fe, params.CreatedAfter, params.CreatedBefore)
	checkURLPrefix(&fe, "url", params.URL)
	filter.URLPrefix = params.URL
	tasks.CheckIdempotencyKey(&fe, "idempotency_key", params.IdempotencyKey)
	filter.IdempotencyKey = params.IdempotencyKey
	labels, labelErrs := tasks.ParseLabelFilter("label", params.Label)
	addLabelErrors(&fe, labelErrs)
	filter.Labels = labels
	filter.CallbackOf = params.CallbackOf
	if err := fe.problem(); err != nil {
		return err
	}
	withBodies, err := includeBody(params.Include)
	if err != nil {
		return err
	}
	page := filter.Limit
	filter.Limit++ // one more tells whether another page follows
	cursor := func(t *model.Task) string { return encodeCursor(t.ID) }
	if !withBodies {
		list, err := s.tasks.List(c.Request().Context(), tenant.ID, filter)
		if err != nil {
			return err
		}
		data, next := paginate(list, page, cursor, taskWithoutBodyJSON)
		return c.JSON(http.StatusOK, openapi.TaskList{Data: data, NextCursor: next})
	}
	release, err := s.takeListBodies(c, tenant.ID)
	if err != nil {
		return err
	}
	defer release()
	list, cut, err := s.tasks.ListWithBodies(c.Request().Context(), tenant.ID, filter, s.cfg.Limits.ListBodyBytes)
	if err != nil {
		return err
	}
	list, next := pageOf(list, page, cut, cursor)
	return writeList(c, list, taskJSON, next)
}

// takeListBodies reserves room for one list answer's bodies of the node's
// budget, or refuses the call with 429: the memory of lists with bodies is
// bounded across calls, not only per call.
func (s *Server) takeListBodies(c echo.Context, tenant uuid.UUID) (release func(), err error) {
	release, ok := s.lists.take(tenant, s.cfg.Limits.ListBodyBytes)
	if !ok {
		s.apiLimits.refused.WithLabelValues("list_bytes").Inc()
		c.Response().Header().Set("Retry-After", "1")
		return nil, newProblem(http.StatusTooManyRequests, "lists-busy", "Too many lists with bodies in progress",
			"this node is answering as many lists with bodies as it holds at once; try again in a moment, or list without include=body")
	}
	return release, nil
}

// includeBody reads a list call's include parameter: whether it asks for
// the items' bodies. A value other than "body" is refused with 400, rather
// than ignored, so that a client misspelling it does not take a list without
// bodies for one with empty bodies.
func includeBody[I interface {
	~string
	Valid() bool
}](include *I) (bool, error) {
	if include == nil {
		return false, nil
	}
	if !(*include).Valid() {
		return false, &problem{status: http.StatusBadRequest, slug: "bad-request", title: "Bad request",
			detail: fmt.Sprintf("include=%q is not something a list can include; the one value is body", string(*include)),
			fields: fieldErrors{{Field: "include", Message: `must be "body", or left out for a list without bodies`}}}
	}
	return true, nil
}

// pageOf is paginate's page and cursor for a list read with a bound on its
// bodies: cut says the bound ended the list early, and the next page starts
// after its last row.
func pageOf[R any](rows []R, page int, cut bool, cursor func(R) string) ([]R, *string) {
	switch {
	case cut && len(rows) > 0:
		next := cursor(rows[len(rows)-1])
		return rows, &next
	case len(rows) > page:
		next := cursor(rows[page-1])
		return rows[:page], &next
	}
	return rows, nil
}

// writeList answers 200 with a page of a list, {"data": [...], "next_cursor":
// ...}, as c.JSON would, but item by item: a page with bodies is never held
// whole as JSON, which can take several times the bytes of its bodies (the
// encoder writes "<" as "\u003c", six bytes). Each row is let go once written.
func writeList[R any, J any](c echo.Context, rows []R, toJSON func(R) J, next *string) error {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	if _, err := io.WriteString(w, `{"data":[`); err != nil {
		return nil // the client has gone: nothing more can reach it
	}
	for i := range rows {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return nil
			}
		}
		if err := enc.Encode(toJSON(rows[i])); err != nil {
			return nil
		}
		var none R
		rows[i] = none
	}
	tail := "]}\n"
	if next != nil {
		cursor, err := json.Marshal(*next)
		if err != nil {
			return fmt.Errorf("encode cursor: %w", err)
		}
		tail = `],"next_cursor":` + string(cursor) + "}\n"
	}
	_, _ = io.WriteString(w, tail)
	return nil
}

// checkCreatedRange refuses a creation-time range that no task can be in,
// which is a mistake (swapped bounds) rather than a question.
func checkCreatedRange(fe *fieldErrors, after, before *time.Time) {
	if after != nil && before != nil && !before.After(*after) {
		fe.add("created_before", "must be later than created_after")
	}
}

// pageRequest reads a list call's limit and cursor: the page size (default
// defaultListLimit) and, after the first page, the id the page starts after.
func pageRequest(fe *fieldErrors, limit *int, cursor *string) (size int, before *uuid.UUID) {
	size = defaultListLimit
	if limit != nil {
		if *limit < 1 || *limit > maxListLimit {
			fe.add("limit", "must be between 1 and %d", maxListLimit)
		}
		size = *limit
	}
	if cursor != nil {
		id, ok := decodeCursor(*cursor)
		if !ok {
			fe.add("cursor", "is not a cursor this API returned")
		}
		before = &id
	}
	return size, before
}

// paginate turns up to page+1 rows (the query asks for one more than the
// page, to know whether another follows) into a page and the cursor of the
// next one, which cursor makes of the page's last row.
func paginate[R, J any](rows []R, page int, cursor func(R) string, toJSON func(R) J) ([]J, *string) {
	data := make([]J, 0, min(len(rows), page))
	for i, r := range rows {
		if i == page {
			next := cursor(rows[page-1])
			return data, &next
		}
		data = append(data, toJSON(r))
	}
	return data, nil
}

// Cursors are opaque to clients: the id of the last item of the page.
func encodeCursor(id uuid.UUID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// A list in name order (topics, flow keys) pages by the last name instead.
func encodeNameCursor(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }

// nameCursor reads a name cursor as given (nil: none) under "cursor"; valid
// says whether a name could be one the list returned.
func nameCursor(fe *fieldErrors, cursor *string, valid func(string) bool) *string {
	if cursor == nil {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(*cursor))
	if err != nil || !valid(string(b)) {
		fe.add("cursor", "is not a cursor this API returned")
	}
	name := string(b)
	return &name
}

// A task's attempts page by the number of the last attempt given.
func encodeAttemptCursor(attempt int) string { return encodeNameCursor(strconv.Itoa(attempt)) }

// attemptCursor reads an attempt cursor as given under "cursor": the number
// of the attempt the page starts after, 0 for none.
func attemptCursor(fe *fieldErrors, cursor *string) int {
	number := nameCursor(fe, cursor, func(s string) bool {
		n, err := strconv.ParseInt(s, 10, 32)
		return err == nil && n > 0
	})
	if number == nil {
		return 0
	}
	after, _ := strconv.Atoi(*number)
	return after
}

func decodeCursor(s string) (uuid.UUID, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != 16 {
		return uuid.Nil, false
	}
	return uuid.UUID(b), true
}

// CancelTask cancels a task that has not been sent yet.
func (s *Server) CancelTask(c echo.Context, id openapi.TaskID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	t, err := s.tasks.Cancel(c.Request().Context(), tenant.ID, id)
	var conflict *tasks.ConflictError
	switch {
	case errors.Is(err, model.ErrNotFound):
		return notFound("task " + id.String())
	case errors.As(err, &conflict):
		return newProblem(http.StatusConflict, "not-cancelable", "Task cannot be canceled",
			"task "+id.String()+" is "+string(conflict.Task.Status)+"; only scheduled and retrying tasks can be canceled")
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, taskJSON(t))
}

// rescheduleRequest is the body of PATCH /v1/tasks/{id}. Times stay strings
// so that a bad one is reported by name, as at creation.
type rescheduleRequest struct {
	RunAt *string `json:"run_at,omitempty"`
	Delay *string `json:"delay,omitempty"`
}

// RescheduleTask moves a scheduled or retrying task to a new time.
func (s *Server) RescheduleTask(c echo.Context, id openapi.TaskID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var req rescheduleRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	now := s.clock.Now()
	var fe fieldErrors
	if req.RunAt == nil && req.Delay == nil {
		fe.add("run_at", "or delay is required")
	}
	due := &tasks.Request{}
	due.RunAt, due.Delay = parseDue(&due.Unreadable, req.RunAt, req.Delay)
	at := s.rules().Due(&fe, due, now)
	if err := fe.problem(); err != nil {
		return err
	}
	t, err := s.tasks.Reschedule(c.Request().Context(), tenant.ID, id, at)
	var conflict *tasks.ConflictError
	switch {
	case errors.Is(err, model.ErrNotFound):
		return notFound("task " + id.String())
	case errors.As(err, &conflict) && expiresBy(conflict.Task, at):
		return rescheduleAfterExpiry(conflict.Task, req.Delay != nil)
	case errors.As(err, &conflict):
		return newProblem(http.StatusConflict, "not-reschedulable", "Task cannot be rescheduled",
			"task "+id.String()+" is "+string(conflict.Task.Status)+"; only scheduled and retrying tasks can be rescheduled")
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, taskJSON(t))
}

// cancelTasksRequest is the body of POST /v1/tasks/cancel, as sent: values
// stay strings so that each bad one is reported by name.
type cancelTasksRequest struct {
	Status        *string `json:"status,omitempty"`
	ScheduleID    *string `json:"schedule_id,omitempty"`
	PublishID     *string `json:"publish_id,omitempty"`
	Topic         *string `json:"topic,omitempty"`
	CreatedAfter  *string `json:"created_after,omitempty"`
	CreatedBefore *string `json:"created_before,omitempty"`
}

// CancelTasks cancels every waiting task of the tenant that matches all the
// conditions given, and says how many.
func (s *Server) CancelTasks(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var req cancelTasksRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var (
		fe     fieldErrors
		filter model.CancelFilter
	)
	if req.Status == nil && req.ScheduleID == nil && req.PublishID == nil && req.Topic == nil &&
		req.CreatedAfter == nil && req.CreatedBefore == nil {
		fe.add("status", "or schedule_id, publish_id, topic, created_after or created_before is required: a bulk cancel needs at least one condition")
	}
	if req.Status != nil {
		switch st := model.TaskStatus(*req.Status); st {
		case model.StatusScheduled, model.StatusRetrying:
			filter.Status = &st
		default:
			fe.add("status", "must be scheduled or retrying: only waiting tasks can be canceled")
		}
	}
	filter.ScheduleID = parseScheduleIDField(&fe, req.ScheduleID)
	filter.PublishID, filter.Topic = parsePublishFields(&fe, req.PublishID, req.Topic)
	filter.CreatedAfter = parseTimeField(&fe, "created_after", req.CreatedAfter)
	filter.CreatedBefore = parseTimeField(&fe, "created_before", req.CreatedBefore)
	checkCreatedRange(&fe, filter.CreatedAfter, filter.CreatedBefore)
	if err := fe.problem(); err != nil {
		return err
	}
	canceled, err := s.tasks.CancelMatching(c.Request().Context(), tenant.ID, filter, actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, openapi.CancelResult{Canceled: canceled})
}

// parseScheduleIDField reads the schedule_id of a bulk call's filter (nil:
// none).
func parseScheduleIDField(fe *fieldErrors, v *string) *uuid.UUID {
	if v == nil {
		return nil
	}
	id, err := uuid.Parse(*v)
	if err != nil {
		fe.add("schedule_id", "must be a schedule id (a UUID)")
		return nil
	}
	return &id
}

// parseTimeField parses an optional RFC 3339 field, reporting a bad one in fe.
func parseTimeField(fe *fieldErrors, field string, v *string) *time.Time {
	if v == nil {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		fe.add(field, "must be an RFC 3339 time such as 2026-11-22T10:00:00Z")
		return nil
	}
	return &t
}

// ListTaskAttempts pages through a task's delivery attempts, in order. It
// pages because replays add attempts to a task without end; the default page
// is the largest, so that most tasks answer in one.
func (s *Server) ListTaskAttempts(c echo.Context, id openapi.TaskID, params openapi.ListTaskAttemptsParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var fe fieldErrors
	page, _ := pageRequest(&fe, params.Limit, nil)
	if params.Limit == nil {
		page = maxListLimit
	}
	after := attemptCursor(&fe, params.Cursor)
	if err := fe.problem(); err != nil {
		return err
	}
	// One more than the page tells whether another page follows.
	attempts, err := s.tasks.Attempts(c.Request().Context(), tenant.ID, id, after, page+1)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("task " + id.String())
	}
	if err != nil {
		return err
	}
	attempts, next := pageOf(attempts, page, false, func(a model.Attempt) string { return encodeAttemptCursor(a.Attempt) })
	out := openapi.AttemptList{Data: make([]openapi.Attempt, 0, len(attempts)), NextCursor: next}
	for _, a := range attempts {
		var headers map[string]string
		if a.ResponseHeaders != nil {
			if err := json.Unmarshal([]byte(*a.ResponseHeaders), &headers); err != nil {
				return fmt.Errorf("response headers of attempt %d of task %s: %w", a.Attempt, id, err)
			}
		}
		out.Data = append(out.Data, openapi.Attempt{
			Attempt:         a.Attempt,
			StartedAt:       a.StartedAt,
			DurationMs:      a.Duration.Milliseconds(),
			StatusCode:      a.StatusCode,
			Error:           a.Error,
			Outcome:         openapi.AttemptOutcome(a.Outcome),
			ResponseBody:    a.ResponseBody,
			ResponseHeaders: headers,
		})
	}
	return c.JSON(http.StatusOK, out)
}

// taskJSON is a task as answered, with its body.
func taskJSON(t *model.Task) openapi.Task {
	out := taskWithoutBodyJSON(t)
	out.Body = string(t.Body)
	out.Report = callbackReport(t)
	return out
}

// taskWithoutBodyJSON is a task as lists, publishes and batches answer it:
// without its body, nor the callback report that is its body decoded.
func taskWithoutBodyJSON(t *model.Task) openapi.Task {
	maxAttempts := t.MaxAttempts
	minBackoff, maxBackoff := formatDuration(t.MinBackoff), formatDuration(t.MaxBackoff)
	return openapi.Task{
		ID:              t.ID,
		Status:          openapi.TaskStatus(t.Status),
		URL:             t.URL,
		Method:          openapi.HTTPMethod(t.Method),
		Headers:         t.Headers,
		RunAt:           t.RunAt,
		CreatedAt:       t.CreatedAt,
		UpdatedAt:       t.UpdatedAt,
		Attempts:        t.Attempts,
		MaxAttempts:     t.MaxAttempts,
		Timeout:         formatDuration(t.Timeout),
		Retry:           openapi.RetryPolicy{MaxAttempts: &maxAttempts, MinBackoff: &minBackoff, MaxBackoff: &maxBackoff},
		NextAttemptAt:   t.NextAttemptAt,
		LastStatusCode:  t.LastStatusCode,
		LastError:       t.LastError,
		IdempotencyKey:  t.IdempotencyKey,
		ScheduleID:      t.ScheduleID,
		Labels:          t.Labels,
		OrderingKey:     t.OrderingKey,
		FlowKey:         t.FlowKey,
		Callback:        t.Callback,
		FailureCallback: t.FailureCallback,
		CallbackOf:      t.CallbackOf,
		CallbackTaskID:  t.CallbackTaskID,
		Topic:           t.Topic,
		PublishID:       t.PublishID,
		EndpointName:    t.EndpointName,
		ExpiresAt:       t.ExpiresAt,
	}
}

// callbackReport is what a callback task reports, its body decoded; nil for
// any other task, and for a callback task whose body an edit replaced with
// something that is not a report.
func callbackReport(t *model.Task) *openapi.CallbackPayload {
	if t.CallbackOf == nil {
		return nil
	}
	var report openapi.CallbackPayload
	if err := json.Unmarshal(t.Body, &report); err != nil || !report.Status.Valid() || report.Attempt < minReportedAttempt(report.Status) || report.Response.Headers == nil {
		return nil
	}
	return &report
}

// formatDuration spells a duration as a person would write it in a request:
// "1h" rather than Go's "1h0m0s", "2m30s" as it is.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/schedule"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// Recurring schedules. The API validates a schedule and computes its first
// occurrence; what storing, pausing, resuming and deleting one mean is the
// task service's (internal/tasks).

const (
	defaultNextCount = 10
	maxNextCount     = 100
	defaultTimezone  = "UTC"
)

// scheduleRequest is the body of POST /v1/schedules as sent, before
// validation: a task request without run_at and delay, plus cron, timezone
// and paused.
type scheduleRequest struct {
	Cron     *string           `json:"cron"`
	Timezone *string           `json:"timezone,omitempty"`
	URL      *string           `json:"url"`
	Method   *string           `json:"method,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     *bodyText         `json:"body,omitempty"`
	Timeout  *string           `json:"timeout,omitempty"`
	Retry    *retryRequest     `json:"retry,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Paused   *bool             `json:"paused,omitempty"`
	// OrderingKey: see taskRequest.
	OrderingKey     *string `json:"ordering_key,omitempty"`
	FlowKey         *string `json:"flow_key,omitempty"`
	Callback        *string `json:"callback,omitempty"`
	FailureCallback *string `json:"failure_callback,omitempty"`
	// RunAt and Delay are read only to say why they do not belong here,
	// which "is not a known field" would not.
	RunAt json.RawMessage `json:"run_at,omitempty"`
	Delay json.RawMessage `json:"delay,omitempty"`
}

// validateSchedule turns a request into a schedule to store, or field
// errors: the task fields exactly as a task's are checked (checkTask) (the tenant's
// retry defaults included), plus cron and timezone. anchor is the anchor of
// an @every schedule (its creation), now the instant its first occurrence
// follows.
func (s *Server) validateSchedule(req *scheduleRequest, tenant *model.Tenant, anchor, now time.Time) (*model.Schedule, error) {
	var fe fieldErrors

	timezone := defaultTimezone
	if req.Timezone != nil {
		timezone = *req.Timezone
	}
	zoneOK := true
	if _, err := schedule.LoadLocation(timezone); err != nil {
		fe.addSchedule(err)
		zoneOK = false
	}
	var sch *schedule.Schedule
	if req.Cron == nil {
		fe.add("cron", "is required")
	} else {
		// With the zone at fault, still check the expression, in UTC.
		zone := timezone
		if !zoneOK {
			zone = defaultTimezone
		}
		parsed, err := schedule.Parse(*req.Cron, zone, anchor)
		if err != nil {
			fe.addSchedule(err)
		} else if zoneOK {
			sch = parsed
		}
	}
	const notHere = "does not apply to a schedule: its occurrences fall at the times cron gives"
	if req.RunAt != nil {
		fe.add("run_at", notHere)
	}
	if req.Delay != nil {
		fe.add("delay", notHere)
	}

	taskReq := &taskRequest{
		URL: req.URL, Method: req.Method, Headers: req.Headers, Body: req.Body, Timeout: req.Timeout, Retry: req.Retry,
		Labels: req.Labels, OrderingKey: req.OrderingKey, FlowKey: req.FlowKey, Callback: req.Callback, FailureCallback: req.FailureCallback,
	}
	task, err := s.checkTask(taskReq.request(), tenant, now)
	var p *problem
	if errors.As(err, &p) {
		fe = append(fe, p.fields...)
	} else if err != nil {
		return nil, err
	}

	paused := req.Paused != nil && *req.Paused
	var next *time.Time
	if sch != nil && !paused {
		at := sch.Next(now)
		if at.IsZero() {
			fe.add("cron", "has no occurrence in the next five years")
		}
		next = &at
	}
	if err := fe.problem(); err != nil {
		return nil, err
	}
	return &model.Schedule{
		Cron:        sch.String(),
		Timezone:    timezone,
		Paused:      paused,
		URL:         task.URL,
		Method:      task.Method,
		Headers:     task.Headers,
		Body:        task.Body,
		Timeout:     task.Timeout,
		MaxAttempts: task.MaxAttempts,
		MinBackoff:  task.MinBackoff,
		MaxBackoff:  task.MaxBackoff,
		Labels:      task.Labels,
		OrderingKey: task.OrderingKey,
		FlowKey:     task.FlowKey,
		NextRunAt:   next,

		Callback:        task.Callback,
		FailureCallback: task.FailureCallback,
		CreatedAt:       now,
	}, nil
}

// addSchedule records an invalid cron or timezone.
func (fe *fieldErrors) addSchedule(err error) {
	if e, ok := schedule.IsError(err); ok {
		fe.add(e.Field, "%s", e.Message)
		return
	}
	fe.add("cron", "%v", err)
}

// CreateSchedule stores a recurring schedule.
func (s *Server) CreateSchedule(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var req scheduleRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	now := s.clock.Now()
	sched, err := s.validateSchedule(&req, tenant, now, now)
	if err != nil {
		return err
	}
	var quota *tasks.ScheduleQuotaError
	if err := s.tasks.CreateSchedule(c.Request().Context(), tenant, sched, actorOf(c)); errors.As(err, &quota) {
		s.apiLimits.refused.WithLabelValues("schedules").Inc()
		c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(scheduleQuotaRetryAfter)))
		return newProblem(http.StatusTooManyRequests, "schedule-quota-exceeded", "Schedule quota exceeded",
			fmt.Sprintf("this tenant may have at most %d schedules and has that many; delete one to make room", quota.Limit))
	} else if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/schedules/"+sched.ID.String())
	return c.JSON(http.StatusCreated, scheduleJSON(sched))
}

// ListSchedules pages through the tenant's schedules, newest first.
func (s *Server) ListSchedules(c echo.Context, params openapi.ListSchedulesParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var (
		fe     fieldErrors
		filter model.ScheduleFilter
	)
	filter.Limit, filter.Before = pageRequest(&fe, params.Limit, params.Cursor)
	if err := fe.problem(); err != nil {
		return err
	}
	withBodies, err := includeBody(params.Include)
	if err != nil {
		return err
	}
	page := filter.Limit
	filter.Limit++ // one more tells whether another page follows
	cursor := func(sc *model.Schedule) string { return encodeCursor(sc.ID) }
	if !withBodies {
		schedules, err := s.tasks.ListSchedules(c.Request().Context(), tenant.ID, filter)
		if err != nil {
			return err
		}
		data, next := paginate(schedules, page, cursor, scheduleWithoutBodyJSON)
		return c.JSON(http.StatusOK, openapi.ScheduleList{Data: data, NextCursor: next})
	}
	release, err := s.takeListBodies(c, tenant.ID)
	if err != nil {
		return err
	}
	defer release()
	schedules, cut, err := s.tasks.ListSchedulesWithBodies(c.Request().Context(), tenant.ID, filter, s.cfg.Limits.ListBodyBytes)
	if err != nil {
		return err
	}
	schedules, next := pageOf(schedules, page, cut, cursor)
	return writeList(c, schedules, scheduleJSON, next)
}

// GetSchedule reads one schedule.
func (s *Server) GetSchedule(c echo.Context, id openapi.ScheduleID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	sc, err := s.tasks.GetSchedule(c.Request().Context(), tenant.ID, id)
	if err != nil {
		return scheduleError(err, id)
	}
	return c.JSON(http.StatusOK, scheduleJSON(sc))
}

// DeleteSchedule deletes a schedule and cancels its waiting occurrences.
func (s *Server) DeleteSchedule(c echo.Context, id openapi.ScheduleID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	sc, err := s.tasks.DeleteSchedule(c.Request().Context(), tenant.ID, id, actorOf(c))
	if err != nil {
		return scheduleError(err, id)
	}
	return c.JSON(http.StatusOK, scheduleJSON(sc))
}

// PauseSchedule stops a schedule and cancels its waiting occurrences.
func (s *Server) PauseSchedule(c echo.Context, id openapi.ScheduleID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	sc, err := s.tasks.PauseSchedule(c.Request().Context(), tenant.ID, id, actorOf(c))
	if err != nil {
		return scheduleError(err, id)
	}
	return c.JSON(http.StatusOK, scheduleJSON(sc))
}

// ResumeSchedule restarts a paused schedule from its first occurrence after
// now: what it missed while paused is not sent.
func (s *Server) ResumeSchedule(c echo.Context, id openapi.ScheduleID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	sc, err := s.tasks.ResumeSchedule(c.Request().Context(), tenant.ID, id, actorOf(c))
	if err != nil {
		return scheduleError(err, id)
	}
	return c.JSON(http.StatusOK, scheduleJSON(sc))
}

// NextScheduleTimes previews the next fire times after now, whether or not
// the schedule is paused.
func (s *Server) NextScheduleTimes(c echo.Context, id openapi.ScheduleID, params openapi.NextScheduleTimesParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	count := defaultNextCount
	if params.Count != nil {
		if *params.Count < 1 || *params.Count > maxNextCount {
			var fe fieldErrors
			fe.add("count", "must be between 1 and %d", maxNextCount)
			return fe.problem()
		}
		count = *params.Count
	}
	times, err := s.tasks.NextRuns(c.Request().Context(), tenant.ID, id, count)
	if err != nil {
		return scheduleError(err, id)
	}
	out := openapi.FireTimeList{Data: make([]openapi.FireTime, 0, len(times))}
	for _, at := range times {
		out.Data = append(out.Data, openapi.FireTime{Local: at, Utc: at.UTC()})
	}
	return c.JSON(http.StatusOK, out)
}

func scheduleError(err error, id uuid.UUID) error {
	if errors.Is(err, model.ErrNotFound) {
		return notFound("schedule " + id.String())
	}
	return err
}

// scheduleJSON is a schedule as answered, with its body.
func scheduleJSON(sc *model.Schedule) openapi.Schedule {
	out := scheduleWithoutBodyJSON(sc)
	out.Body = string(sc.Body)
	return out
}

// scheduleWithoutBodyJSON is a schedule as a list answers it unless asked
// for bodies.
func scheduleWithoutBodyJSON(sc *model.Schedule) openapi.Schedule {
	maxAttempts := sc.MaxAttempts
	minBackoff, maxBackoff := formatDuration(sc.MinBackoff), formatDuration(sc.MaxBackoff)
	return openapi.Schedule{
		ID:          sc.ID,
		Cron:        sc.Cron,
		Timezone:    sc.Timezone,
		Paused:      sc.Paused,
		NextRunAt:   sc.NextRunAt,
		LastRunAt:   sc.LastRunAt,
		URL:         sc.URL,
		Method:      openapi.HTTPMethod(sc.Method),
		Headers:     sc.Headers,
		Timeout:     formatDuration(sc.Timeout),
		Retry:       openapi.RetryPolicy{MaxAttempts: &maxAttempts, MinBackoff: &minBackoff, MaxBackoff: &maxBackoff},
		CreatedAt:   sc.CreatedAt,
		UpdatedAt:   sc.UpdatedAt,
		Labels:      sc.Labels,
		OrderingKey: sc.OrderingKey,
		FlowKey:     sc.FlowKey,

		Callback:        sc.Callback,
		FailureCallback: sc.FailureCallback,

		SkippedOccurrences: sc.SkippedOccurrences,
		LastSkippedAt:      sc.LastSkippedAt,
	}
}

// scheduleQuotaRetryAfter is the Retry-After of a schedule refused for the
// tenant's max_schedules: only a deletion makes room, so a minute is as
// good as any.
const scheduleQuotaRetryAfter = time.Minute

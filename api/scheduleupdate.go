package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
)

// PATCH /v1/schedules/{id} is a JSON merge patch (RFC 7386) of the create
// request. The schedule is written out as the create request that would
// make it, the patch is merged into that, and the result goes through the
// create's own decoding and validation: a change is valid exactly when a
// create with the same fields would be, null means what leaving a field
// out of a create means (its default, or "is required"), and a field added
// to the create is patchable without more code here.

// UpdateSchedule changes a schedule in place.
func (s *Server) UpdateSchedule(c echo.Context, id openapi.ScheduleID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	patch, err := readMergePatch(c)
	if err != nil {
		return err
	}
	sc, err := s.tasks.UpdateSchedule(c.Request().Context(), tenant.ID, id, func(current *model.Schedule) (*model.Schedule, error) {
		merged, err := mergeSchedulePatch(current, patch)
		if err != nil {
			return nil, err
		}
		var req scheduleRequest
		if err := decodeJSONFrom(bytes.NewReader(merged), &req); err != nil {
			return nil, err
		}
		return s.validateSchedule(&req, tenant, current.CreatedAt, s.clock.Now())
	})
	if err != nil {
		return scheduleError(err, id)
	}
	return c.JSON(http.StatusOK, scheduleJSON(sc))
}

// readMergePatch reads the body of a schedule's merge patch: a JSON object
// whose members are the create request's, each checked for its type as the
// create checks it (a null is allowed anywhere: it resets). An unknown member
// is refused here, before the merge, so that it is named even when null.
func readMergePatch(c echo.Context) (map[string]any, error) {
	raw, err := io.ReadAll(c.Request().Body)
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return nil, he // the body limit
	}
	if err != nil {
		return nil, fmt.Errorf("read schedule patch: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(raw), jsonNull) {
		return nil, newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON",
			"the body must be a JSON object: a merge patch of the schedule")
	}
	var typed scheduleRequest
	if err := decodeJSONFrom(bytes.NewReader(raw), &typed); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // integers go through the merge as written
	var patch map[string]any
	if err := dec.Decode(&patch); err != nil {
		return nil, fmt.Errorf("read schedule patch: %w", err)
	}
	return patch, nil
}

// scheduleRequestFields are the members of a create request, by JSON name,
// but run_at and delay, which no schedule has.
var scheduleRequestFields = func() map[string]bool {
	fields := map[string]bool{}
	t := reflect.TypeFor[scheduleRequest]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	delete(fields, "run_at")
	delete(fields, "delay")
	return fields
}()

// mergeSchedulePatch writes sc as the create request that would make it
// (its answer, less the members a request has not) and merges patch into
// it, returning the merged request as JSON.
func mergeSchedulePatch(sc *model.Schedule, patch map[string]any) ([]byte, error) {
	answer, err := json.Marshal(scheduleJSON(sc))
	if err != nil {
		return nil, fmt.Errorf("write schedule %s as a request: %w", sc.ID, err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("write schedule %s as a request: %w", sc.ID, err)
	}
	maps.DeleteFunc(doc, func(k string, _ any) bool { return !scheduleRequestFields[k] })
	// A stored header is named canonically; the patch may name it in any
	// case, as HTTP does, and still replaces or removes it.
	if headers, ok := patch["headers"].(map[string]any); ok {
		stored, _ := doc["headers"].(map[string]any)
		renamed := maps.Clone(headers)
		for name := range headers {
			if canonical := http.CanonicalHeaderKey(name); canonical != name && stored[canonical] != nil {
				if _, given := headers[canonical]; !given {
					renamed[canonical] = nil
				}
			}
		}
		patch = maps.Clone(patch)
		patch["headers"] = renamed
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return nil, fmt.Errorf("merge the patch of schedule %s: %w", sc.ID, err)
	}
	return merged, nil
}

// mergePatch applies a JSON merge patch to target, as RFC 7386 section 2
// defines: an object patch merges member by member, a null member removes
// the target's, anything else replaces the target whole.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := maps.Clone(t)
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

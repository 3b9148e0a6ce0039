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
	}, actorOf(c))
	if err != nil {
		return scheduleError(err, id)
	}
	return c.JSON(http.StatusOK, scheduleJSON(sc))
}

// readMergePatch reads the body of a schedule's merge patch: a JSON object
// whose members are the create request's, each checked for its type as the
// create checks it (a null is allowed anywhere: it resets). An unknown member
// is refused here, before the merge, so that it is named even when null. The
// members are returned in the order written, their values as written.
func readMergePatch(c echo.Context) ([]jsonMember, error) {
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
	patch, ok := objectMembers(raw)
	if !ok {
		return nil, fmt.Errorf("read schedule patch: not the JSON object it decoded as")
	}
	return patch, nil
}

// jsonMember is one member of a JSON object: its name, decoded, and its
// value as written.
type jsonMember struct {
	name  string
	value json.RawMessage
}

// objectMembers returns the members of the JSON object raw in the order
// written, or false when raw is not an object.
func objectMembers(raw []byte) ([]jsonMember, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var members []jsonMember
	for dec.More() {
		tok, err := dec.Token()
		name, isName := tok.(string)
		if err != nil || !isName {
			return nil, false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		members = append(members, jsonMember{name, value})
	}
	return members, true
}

// scheduleRequestFields are the members of a create request, by JSON name,
// but run_at and delay, which no schedule has.
var scheduleRequestFields = func() map[string]bool {
	fields := map[string]bool{}
	for _, name := range jsonFieldNames(reflect.TypeFor[scheduleRequest]()) {
		fields[name] = true
	}
	delete(fields, "run_at")
	delete(fields, "delay")
	return fields
}()

// requestFieldNames are the JSON names of the members of each object of a
// create request that has named members, by its path ("" for the request).
var requestFieldNames = map[string][]string{
	"":      jsonFieldNames(reflect.TypeFor[scheduleRequest]()),
	"retry": jsonFieldNames(reflect.TypeFor[retryRequest]()),
}

// jsonFieldNames are the JSON names of the fields of struct type t.
func jsonFieldNames(t reflect.Type) []string {
	names := make([]string, t.NumField())
	for i := range t.NumField() {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}

// requestMemberName is the name the create request knows a member of the
// object at path by. encoding/json matches a member to a field whatever the
// letter case ("URL" is url), so the merge must too: "URL" merged beside the
// schedule's own "url" would lose to it in the decoding and be dropped
// without a word.
func requestMemberName(path, name string) string {
	for _, field := range requestFieldNames[path] {
		if strings.EqualFold(field, name) {
			return field
		}
	}
	return name
}

// mergeSchedulePatch writes sc as the create request that would make it
// (its answer, less the members a request has not) and merges patch into
// it, returning the merged request as JSON.
func mergeSchedulePatch(sc *model.Schedule, patch []jsonMember) ([]byte, error) {
	answer, err := json.Marshal(scheduleJSON(sc))
	if err != nil {
		return nil, fmt.Errorf("write schedule %s as a request: %w", sc.ID, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(answer, &doc); err != nil {
		return nil, fmt.Errorf("write schedule %s as a request: %w", sc.ID, err)
	}
	maps.DeleteFunc(doc, func(k string, _ json.RawMessage) bool { return !scheduleRequestFields[k] })
	for _, m := range patch {
		stored, ok := doc["headers"]
		if !ok || requestMemberName("", m.name) != "headers" {
			continue
		}
		if doc["headers"], err = unshadowHeaders(stored, m.value); err != nil {
			return nil, fmt.Errorf("merge the headers of schedule %s: %w", sc.ID, err)
		}
	}
	merged, err := mergePatch(doc, patch, "")
	if err != nil {
		return nil, fmt.Errorf("merge the patch of schedule %s: %w", sc.ID, err)
	}
	// run_at and delay, which no schedule has, go through as given, null
	// included, for the create's decoding to refuse them by name: merged
	// away, a null would pass for a patch that changes nothing.
	for _, m := range patch {
		if name := requestMemberName("", m.name); name == "run_at" || name == "delay" {
			merged[name] = m.value
		}
	}
	out, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("merge the patch of schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// unshadowHeaders removes from the stored headers each that the headers
// patch names in other letters: a stored header is named canonically, and
// the patch may name it in any case, as HTTP does, and still replaces or
// removes it. A header the patch also names canonically stays, to be merged
// (and the two names refused together by the create's checks).
func unshadowHeaders(stored, patch json.RawMessage) (json.RawMessage, error) {
	given, ok := objectMembers(patch)
	if !ok || len(bytes.TrimSpace(stored)) == 0 || isJSONNull(stored) {
		return stored, nil
	}
	var headers map[string]json.RawMessage
	if err := json.Unmarshal(stored, &headers); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, m := range given {
		names[m.name] = true
	}
	for _, m := range given {
		if canonical := http.CanonicalHeaderKey(m.name); canonical != m.name && !names[canonical] {
			delete(headers, canonical)
		}
	}
	return json.Marshal(headers)
}

// mergePatch applies a JSON merge patch, the members of an object, to target,
// the object at path of a create request, as RFC 7386 section 2 defines: an
// object patch merges member by member, a null member removes the target's,
// anything else replaces the target whole. Values stay as written, byte for
// byte: decoded and written again, invalid UTF-8 and unpaired surrogate
// escapes would come out as U+FFFD, which the create's decoding refuses only
// as sent.
func mergePatch(target map[string]json.RawMessage, patch []jsonMember, path string) (map[string]json.RawMessage, error) {
	out := maps.Clone(target)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	for _, m := range patch {
		name := requestMemberName(path, m.name)
		if isJSONNull(m.value) {
			delete(out, name)
			continue
		}
		inner, ok := objectMembers(m.value)
		if !ok {
			out[name] = m.value
			continue
		}
		var current map[string]json.RawMessage
		if existing, ok := out[name]; ok && len(bytes.TrimSpace(existing)) > 0 && bytes.TrimSpace(existing)[0] == '{' {
			if err := json.Unmarshal(existing, &current); err != nil {
				return nil, err
			}
		}
		mergedInner, err := mergePatch(current, inner, strings.TrimPrefix(path+"."+name, "."))
		if err != nil {
			return nil, err
		}
		if out[name], err = json.Marshal(mergedInner); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isJSONNull reports whether a JSON value is null.
func isJSONNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), jsonNull) }

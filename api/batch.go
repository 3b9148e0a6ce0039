package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

const (
	// maxBatchItems is the most tasks one POST /v1/tasks/batch may carry.
	maxBatchItems = 1000
	// maxBatchBytes bounds the body of POST /v1/tasks/batch, and so the
	// memory one batch call holds. Each item's webhook body is still bounded
	// by Limits.MaxBody; this bounds their sum: a thousand tasks of 32 KiB,
	// or a few of the largest. A batch over it answers 413.
	maxBatchBytes = 32 << 20
	batchPath     = "/v1/tasks/batch"
)

// batchBodyLimit is the body limit of the batch route: maxBatchBytes, or the
// single-call limit (see New) if that is larger, so that any task a single
// call accepts also fits in a batch on its own.
func (s *Server) batchBodyLimit() int64 { return batchBodyLimit(s.cfg.Limits.MaxBody) }

func batchBodyLimit(maxBody int) int64 {
	return max(maxBatchBytes, 4*int64(maxBody)+64<<10)
}

// isBatchRoute tells the server-wide body limit to leave the batch route to
// the larger limit CreateTasksBatch applies itself.
func isBatchRoute(c echo.Context) bool {
	return c.Request().Method == http.MethodPost && c.Path() == batchPath
}

// limitedBody fails a read past limit bytes with the error the server-wide
// body limit gives, so that decodeJSON answers 413 for both.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, echo.ErrStatusRequestEntityTooLarge
	}
	return n, err
}

// batchRequest is the body of POST /v1/tasks/batch. Items stay raw until
// each is decoded on its own, so that one malformed item fails alone.
type batchRequest struct {
	Tasks *[]json.RawMessage `json:"tasks"`
}

// batchItemRequest is one item: a task request and its own idempotency key.
type batchItemRequest struct {
	taskRequest
	IdempotencyKey *string `json:"idempotency_key,omitempty"`
}

// CreateTasksBatch schedules up to maxBatchItems tasks in one call. Each item
// is decoded and validated on its own, with the rules of POST /v1/tasks;
// the valid ones are stored together (tasks.Service.CreateBatch), and the
// answer holds one result per item, in request order.
func (s *Server) CreateTasksBatch(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	limit := s.batchBodyLimit()
	r := c.Request()
	if r.ContentLength > limit {
		return echo.ErrStatusRequestEntityTooLarge
	}
	reserve := limit
	if r.ContentLength >= 0 {
		reserve = r.ContentLength
	}
	release, ok := s.batches.take(tenant.ID, reserve)
	if !ok {
		s.apiLimits.refused.WithLabelValues("batch_bytes").Inc()
		c.Response().Header().Set("Retry-After", "1")
		return newProblem(http.StatusTooManyRequests, "batches-busy", "Too many batches in progress",
			"this node is reading as many batch bytes as it holds at once; try again in a moment, or send smaller batches")
	}
	defer release()
	r.Body = &limitedBody{ReadCloser: r.Body, left: limit}

	items, err := decodeBatch(c)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	results := make([]openapi.BatchResult, len(items))
	// valid are the valid items' tasks, to store; validAt[k] is the index in
	// the request of valid[k].
	valid := make([]*model.Task, 0, len(items))
	validAt := make([]int, 0, len(items))
	for i, raw := range items {
		task, err := s.batchItemTask(raw, tenant, now)
		items[i] = nil // the decoded task is all that is needed from here on
		var p *problem
		switch {
		case errors.As(err, &p):
			results[i].Error = itemProblem(p, i)
			continue
		case err != nil:
			return err
		}
		valid = append(valid, task)
		validAt = append(validAt, i)
	}

	stored, err := s.tasks.CreateBatch(c.Request().Context(), tenant, valid)
	if err != nil {
		return err
	}
	traceTaskCount(c, len(valid))
	overQuota, overDaily := 0, 0
	// retryAfter is the longest wait of the items refused over a quota: a
	// client that reads only the header, as it would of a single create's
	// 429, learns when every refused item may fit.
	var retryAfter time.Duration
	for k, res := range stored {
		i := validAt[k]
		var (
			quota *tasks.QuotaError
			daily *tasks.DailyQuotaError
		)
		switch {
		case errors.As(res.Err, &quota):
			overQuota++
			retryAfter = max(retryAfter, quota.RetryAfter)
			results[i].Error = itemProblem(newProblem(http.StatusTooManyRequests, "quota-exceeded", "Pending-task quota exceeded",
				fmt.Sprintf("this tenant may have at most %d pending tasks (scheduled, retrying or dispatching)", quota.Limit)), i)
		case errors.As(res.Err, &daily):
			overDaily++
			retryAfter = max(retryAfter, daily.RetryAfter(now))
			results[i].Error = itemProblem(newProblem(http.StatusTooManyRequests, "quota-exceeded", "Daily task quota exceeded",
				dailyQuotaDetail(daily)), i)
		case valid[k].Topic != nil && res.Err != nil:
			p := publishProblem(res.Err, *valid[k].Topic, "idempotency_key")
			if p == nil {
				return res.Err
			}
			results[i].Error = itemProblem(p, i)
		case errors.Is(res.Err, tasks.ErrKeyReused):
			results[i].Error = itemProblem(newProblem(http.StatusUnprocessableEntity, "idempotency-key-reused",
				"Idempotency key reused", "this idempotency_key was already used by a different request; use a new key for a new task"), i)
		case res.Err != nil:
			return res.Err
		case res.Publish != nil:
			out := publishJSON(res.Publish)
			results[i].Publish = &out
			if res.Replayed {
				replayed := true
				results[i].Replayed = &replayed
			}
		case res.Replayed:
			out, replayed := taskWithoutBodyJSON(res.Task), true
			results[i].Task, results[i].Replayed = &out, &replayed
		default:
			out := taskWithoutBodyJSON(res.Task)
			results[i].Task = &out
		}
	}
	if retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(retryAfter)))
	}
	if overQuota > 0 {
		s.apiLimits.refused.WithLabelValues("pending_tasks").Add(float64(overQuota))
	}
	if overDaily > 0 {
		s.apiLimits.refused.WithLabelValues("tasks_per_day").Add(float64(overDaily))
	}
	return c.JSON(http.StatusOK, openapi.BatchResponse{Data: results})
}

// decodeBatch reads the envelope of POST /v1/tasks/batch: its items, still
// raw, or the problem of the whole call.
func decodeBatch(c echo.Context) ([]json.RawMessage, error) {
	var req batchRequest
	if err := decodeJSON(c, &req); err != nil {
		return nil, err
	}
	var fe fieldErrors
	switch {
	case req.Tasks == nil:
		fe.add("tasks", "is required")
	case len(*req.Tasks) == 0:
		fe.add("tasks", "must hold at least one task")
	case len(*req.Tasks) > maxBatchItems:
		fe.add("tasks", "must hold at most %d tasks, not %d; split the batch", maxBatchItems, len(*req.Tasks))
	}
	if err := fe.problem(); err != nil {
		return nil, err
	}
	return *req.Tasks, nil
}

// batchItemTask decodes and validates one item of a batch into a task to
// store, or returns the problem that item has. The rules are those of
// POST /v1/tasks, the item's idempotency_key standing for the header.
func (s *Server) batchItemTask(raw json.RawMessage, tenant *model.Tenant, now time.Time) (*model.Task, error) {
	var req batchItemRequest
	if err := decodeItem(raw, &req); err != nil {
		return nil, err
	}
	checked := req.request()
	checked.IdempotencyKey = req.IdempotencyKey
	task, err := s.checkTask(checked, tenant, now)
	if err != nil {
		return nil, err
	}
	if task.IdempotencyKey != nil {
		// The hash of the task request alone, as for a single call: an item
		// repeating a single call made with the same key is its replay.
		task.RequestHash = requestHash(&req.taskRequest)
	}
	return task, nil
}

// itemProblem renders an item's error as the problem of its result. The
// instance points at the item in the request, as a JSON pointer.
func itemProblem(p *problem, i int) *openapi.Problem {
	instance := batchPath + "#/tasks/" + strconv.Itoa(i)
	return &openapi.Problem{
		Type:     problemTypePrefix + p.slug,
		Title:    p.title,
		Status:   p.status,
		Detail:   p.detail,
		Errors:   p.fields,
		Instance: &instance,
	}
}

// decodeItem decodes one batch item strictly, as decodeJSON decodes the body
// of a single call, and maps its failures to the same problems. The item is
// one complete JSON value already (the envelope was parsed), so only its
// shape can be wrong.
func decodeItem(raw json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		// encoding/json names a promoted field by its path through the
		// embedded struct; the client knows it by its JSON name alone.
		var fe fieldErrors
		fe.add(strings.TrimPrefix(typeErr.Field, "taskRequest."), "must be a JSON %s, not %s",
			jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		return fe.problem()
	case errors.As(err, &typeErr):
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the item must be a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		var fe fieldErrors
		fe.add(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field")
		return fe.problem()
	default:
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", fmt.Sprintf("the item is not valid: %v", err))
	}
}

package tasks

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Bounds of what a bulk edit answers about itself.
const (
	// EditSampleSize is how many of the changes a dry run shows.
	EditSampleSize = 20
	// editRefusalReasons bounds the distinct reasons a bulk edit reports,
	// editRefusalIDs the ids it names for each: the rest are counted.
	editRefusalReasons = 20
	editRefusalIDs     = 5
	// editChunk bounds the tasks one statement of a bulk edit reads or
	// changes, as the store's bulk replay bounds its own.
	editChunk = 1000
)

// EditReplayResult is what a bulk edit and replay did, or with a dry run
// would do.
type EditReplayResult struct {
	// Matched counts the dead tasks the filter and the edit's URL prefix
	// match; Replayed those edited and replayed (0 on a dry run); Changed
	// those whose URL or headers the edit changes (on a dry run: would);
	// Refused those left dead and unchanged because the edit would make
	// them invalid, by the reasons in Refusals.
	Matched, Replayed, Changed, Refused int
	// Sample is, on a dry run, the first EditSampleSize changes in id order.
	Sample   []EditSample
	Refusals []EditRefusal
}

// EditSample is what a bulk edit changes in one task.
type EditSample struct {
	ID                  uuid.UUID
	URLBefore, URLAfter string
	// SetHeaders are the headers whose value the edit sets or changes, and
	// RemovedHeaders those the task had that it removes.
	SetHeaders     map[string]string
	RemovedHeaders []string
}

// EditRefusal is one reason tasks were refused, with how many and the ids
// of the first few.
type EditRefusal struct {
	Reason  string
	Count   int
	TaskIDs []uuid.UUID
}

// headerIdentity is the name two headers are the same header under: letter
// case aside, and '_' read as '-' as CGI, WSGI and Rack receivers read it
// (CheckHeaders refuses two names with one identity).
func headerIdentity(name string) string {
	return http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))
}

// EditTask works out what the bulk edit e makes of task t of tenant, and
// checks the result as a create's URL and headers are checked: the edit to
// store, whether it changes anything, and what is wrong with it (nothing:
// the edit may be stored).
func (r Rules) EditTask(t model.EditTarget, e model.BulkEdit, tenant *model.Tenant) (model.TaskEdit, bool, FieldErrors) {
	url := t.URL
	if e.URLFrom != "" && strings.HasPrefix(url, e.URLFrom) {
		url = e.URLTo + strings.TrimPrefix(url, e.URLFrom)
	}
	headers := make(map[string]string, len(t.Headers)+len(e.SetHeaders))
	drop := make(map[string]bool, len(e.SetHeaders)+len(e.RemoveHeaders))
	for name := range e.SetHeaders {
		drop[headerIdentity(name)] = true
	}
	for _, name := range e.RemoveHeaders {
		drop[headerIdentity(name)] = true
	}
	for name, value := range t.Headers {
		if !drop[headerIdentity(name)] {
			headers[name] = value
		}
	}
	maps.Copy(headers, e.SetHeaders)
	var fe FieldErrors
	if url != t.URL {
		r.CheckURL(&fe, "url", url, tenant)
	}
	headers = CheckHeaders(&fe, headers)
	changed := url != t.URL || !maps.Equal(headers, t.Headers)
	return model.TaskEdit{URL: &url, Headers: headers}, changed, fe
}

// sample describes the change of a task that edit makes.
func sample(t model.EditTarget, edit model.TaskEdit) EditSample {
	s := EditSample{ID: t.ID, URLBefore: t.URL, URLAfter: *edit.URL, SetHeaders: map[string]string{}, RemovedHeaders: []string{}}
	for name, value := range edit.Headers {
		if old, ok := t.Headers[name]; !ok || old != value {
			s.SetHeaders[name] = value
		}
	}
	for name := range t.Headers {
		if _, ok := edit.Headers[name]; !ok {
			s.RemovedHeaders = append(s.RemovedHeaders, name)
		}
	}
	slices.Sort(s.RemovedHeaders)
	return s
}

// refuse counts task id as refused for what fe says.
func (res *EditReplayResult) refuse(id uuid.UUID, fe FieldErrors) {
	res.Refused++
	parts := make([]string, len(fe))
	for i, f := range fe {
		parts[i] = f.Field + ": " + f.Message
	}
	reason := strings.Join(parts, "; ")
	for i := range res.Refusals {
		if res.Refusals[i].Reason == reason {
			res.Refusals[i].Count++
			if len(res.Refusals[i].TaskIDs) < editRefusalIDs {
				res.Refusals[i].TaskIDs = append(res.Refusals[i].TaskIDs, id)
			}
			return
		}
	}
	if len(res.Refusals) == editRefusalReasons {
		// Past the bound, the last entry gathers every other reason.
		last := &res.Refusals[len(res.Refusals)-1]
		last.Reason, last.TaskIDs = "other reasons", nil
		last.Count++
		return
	}
	res.Refusals = append(res.Refusals, EditRefusal{Reason: reason, Count: 1, TaskIDs: []uuid.UUID{id}})
}

// narrowURLPrefix combines the filter's URL prefix with the edit's: a task
// must start with both. It returns false when no URL can.
func narrowURLPrefix(f *model.ReplayFilter, from string) bool {
	switch {
	case from == "":
	case f.URLPrefix == nil || strings.HasPrefix(from, *f.URLPrefix):
		f.URLPrefix = &from
	case !strings.HasPrefix(*f.URLPrefix, from):
		return false
	}
	return true
}

// EditReplayMatching changes, by edit, every dead task of the tenant that
// matches f (and whose URL starts with edit.URLFrom, when given), and
// replays it as ReplayMatching does; with dryRun it changes nothing and
// says what it would change. Each task's URL and headers are worked out and
// checked by rules.EditTask: a task the edit would make invalid is left dead
// and unchanged, and counted with its reason. Its body and every other field
// stay as they are.
//
// The tasks are read and written a chunk at a time (editChunk), each
// chunk's changes one statement and commit, so it is not atomic: on an error
// the tasks replayed before it stay replayed, and the result counts them.
// As in ReplayMatching, with max_pending_tasks set only as many tasks are
// replayed as the quota has room for, oldest first; with no room at all it
// gives a *QuotaError. A run that replays any task is audited as actor's.
func (s *Service) EditReplayMatching(ctx context.Context, tenant *model.Tenant, f model.ReplayFilter, edit model.BulkEdit,
	rules Rules, dryRun bool, actor string) (*EditReplayResult, error) {
	res := &EditReplayResult{}
	if !narrowURLPrefix(&f, edit.URLFrom) {
		return res, nil
	}
	room := -1 // no bound
	if quota := tenant.Limits.MaxPendingTasks; quota > 0 && !dryRun {
		pending, err := s.store.CountPendingTasks(ctx, tenant.ID, quota)
		if err != nil {
			return nil, fmt.Errorf("count pending tasks of tenant %s: %w", tenant.ID, err)
		}
		if pending >= quota {
			matched, err := s.store.CountDeadTasks(ctx, tenant.ID, f)
			if err != nil || matched == 0 {
				return &EditReplayResult{Matched: matched}, err
			}
			return nil, &QuotaError{Limit: quota, Pending: pending, Adding: matched, RetryAfter: QuotaRetryAfter}
		}
		room = quota - pending
	}
	err := s.editReplayChunks(ctx, tenant, f, edit, rules, dryRun, room, res)
	if !dryRun && res.Replayed > 0 {
		detail := map[string]any{"matched": res.Matched, "replayed": res.Replayed, "changed": res.Changed, "refused": res.Refused,
			"filter": filterDetail(nil, f.ScheduleID, f.PublishID, f.Topic, f.URLPrefix, f.Labels, f.CreatedAfter, f.CreatedBefore),
			"edit":   editDetail(edit)}
		err = s.auditBulk(ctx, tenant.ID, actor, AuditTasksEditReplayed, detail, err)
	}
	if err != nil {
		return res, err
	}
	return res, nil
}

// editReplayChunks walks the matching dead tasks a chunk at a time, adding
// to res, and past dryRun writes each chunk's changes, at most room of them
// in all (negative: no bound).
func (s *Service) editReplayChunks(ctx context.Context, tenant *model.Tenant, f model.ReplayFilter, edit model.BulkEdit,
	rules Rules, dryRun bool, room int, res *EditReplayResult) error {
	after := uuid.Nil
	for {
		targets, err := s.store.DeadTasksToEdit(ctx, tenant.ID, f, after, editChunk)
		if err != nil {
			return err
		}
		var (
			changes []model.TaskChange
			changed = map[uuid.UUID]bool{}
		)
		for _, t := range targets {
			res.Matched++
			e, differs, fe := rules.EditTask(t, edit, tenant)
			switch {
			case len(fe) > 0:
				res.refuse(t.ID, fe)
			case dryRun:
				if differs {
					res.Changed++
					if len(res.Sample) < EditSampleSize {
						res.Sample = append(res.Sample, sample(t, e))
					}
				}
			case room < 0 || res.Replayed+len(changes) < room:
				changes = append(changes, model.TaskChange{Was: t, Edit: e})
				changed[t.ID] = differs
			}
		}
		if len(changes) > 0 {
			ids, at, err := s.store.EditReplayTasks(ctx, tenant.ID, changes, s.clock.Now())
			for _, id := range ids {
				s.announce.Schedule(id, at)
				res.Replayed++
				if changed[id] {
					res.Changed++
				}
			}
			if err != nil {
				return err
			}
		}
		if len(targets) < editChunk {
			return nil
		}
		after = targets[len(targets)-1].ID
	}
}

// editDetail is what the audit log records of a bulk edit: the origins of
// the URL prefixes and the names of the headers, never their values.
func editDetail(e model.BulkEdit) map[string]any {
	d := map[string]any{}
	if e.URLFrom != "" {
		d["url_from"], d["url_to"] = auditOrigin(e.URLFrom), auditOrigin(e.URLTo)
	}
	if len(e.SetHeaders) > 0 {
		d["set_headers"] = slices.Sorted(maps.Keys(e.SetHeaders))
	}
	if len(e.RemoveHeaders) > 0 {
		d["remove_headers"] = e.RemoveHeaders
	}
	return d
}

package hookwheel

import "github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"

type (
	// ReplayChange is what an edit changes in one task, in the sample of a
	// dry run of ReplayDead with an Edit.
	ReplayChange = apiclient.ReplayChange
	// ReplayRefusal is why ReplayDead with an Edit left tasks dead and
	// unchanged: the edit would have made them invalid.
	ReplayRefusal = apiclient.ReplayRefusal
)

// DeadEdit is what ReplayDead changes in every task it replays, before
// replaying it: the start of its URL, its headers, or both. The body and
// every other field stay. Each task's result is checked as a created task's
// URL and headers are; a task the edit would make invalid stays dead and
// unchanged, counted in ReplayResult.Refused with the reason.
//
// Unlike ReplayEdit, whose Headers replace all of one task's headers, a
// DeadEdit changes headers by name, since the tasks it reaches may each
// carry other headers.
type DeadEdit struct {
	// URLPrefixFrom and URLPrefixTo, both or neither: every task whose URL
	// starts with URLPrefixFrom gets URLPrefixTo in its place, the rest of
	// the URL kept. URLPrefixFrom is a condition too: only the dead tasks
	// whose URL starts with it are replayed.
	URLPrefixFrom, URLPrefixTo string
	// SetHeaders gives headers their values, replacing a task's header of
	// the same name (letter case aside).
	SetHeaders map[string]string
	// RemoveHeaders takes headers away from the tasks that have them.
	RemoveHeaders []string
}

// body is the edit as the API takes it; nil for none.
func (e *DeadEdit) body() *apiclient.ReplayEdit {
	if e == nil {
		return nil
	}
	out := &apiclient.ReplayEdit{}
	if e.URLPrefixFrom != "" || e.URLPrefixTo != "" {
		out.URLPrefix = &apiclient.ReplayURLPrefix{From: e.URLPrefixFrom, To: e.URLPrefixTo}
	}
	if len(e.SetHeaders) > 0 || len(e.RemoveHeaders) > 0 {
		out.Headers = &apiclient.ReplayHeaderEdit{Set: e.SetHeaders, Remove: e.RemoveHeaders}
	}
	return out
}

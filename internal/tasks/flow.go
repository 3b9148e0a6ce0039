package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Flow-control keys. A task may name a flow key; its tenant gives a key a
// rate (sends per period) and a parallelism (sends in flight), or gives
// every key without limits of its own the same ones through the key "*".
// The dispatcher holds keyed sends to them across every node: a task over
// its key's limits waits (a deferral, not an attempt), in due order. Keys
// are free text within the rules below and cost nothing until used, so a
// tenant may have as many as it has customers.

// The bounds of flow keys and their limits. Past them a number is a typo,
// and the limiter's microsecond arithmetic stays exact.
const (
	MaxFlowKeyLen = 255
	// MaxFlowLimits is the most keys a tenant may set limits for. Keys
	// that tasks name are not counted: they cost nothing until limited,
	// and "*" limits any number of them.
	MaxFlowLimits      = 100_000
	MaxFlowRate        = 1_000_000
	MaxFlowParallelism = 100_000
	// MinFlowPeriod is a second: the limiter forgives a send some 20 ms of
	// jitter around its slot, which a shorter period could not absorb
	// without slowing its rate many times over.
	MinFlowPeriod = time.Second
	MaxFlowPeriod = 24 * time.Hour
	// DefaultFlowPeriod is the period of a rate given without one.
	DefaultFlowPeriod = time.Second
)

// FlowKeyProblem says what is wrong with key as a task's flow key, or ""
// when nothing: 1 to MaxFlowKeyLen characters of A-Z, a-z, 0-9 and
// . _ - : @ + =. The set keeps a key usable as it is in a URL path
// (PUT /v1/flow-keys/{key}), a shell and a Redis key; "*" names the
// default limits and is no task's key.
func FlowKeyProblem(key string) string {
	if key == "" {
		return "must not be empty: leave it out for a task without a flow key"
	}
	if len(key) > MaxFlowKeyLen {
		return fmt.Sprintf("must be at most %d characters", MaxFlowKeyLen)
	}
	if key == model.DefaultFlowKey {
		return `"*" names the default limits of every key, not a key: name the task's own key`
	}
	if strings.Trim(key, ".") == "" {
		// "." and ".." are path segments a URL resolves away: the key's
		// limits could not be set by PUT /v1/flow-keys/{key}.
		return "must hold a character other than '.'"
	}
	for i := 0; i < len(key); i++ {
		if !flowKeyByte(key[i]) {
			return "must be characters of A-Z, a-z, 0-9 and . _ - : @ + = only"
		}
	}
	return ""
}

func flowKeyByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '.', '_', '-', ':', '@', '+', '=':
		return true
	}
	return false
}

// CheckFlowKey checks a task's flow key as given (nil: none), under
// "flow_key", and returns it.
func CheckFlowKey(rep Reporter, key *string) *string {
	return checkKey(rep, "flow_key", key, FlowKeyProblem)
}

// FlowLimitKeyProblem says what is wrong with key as the key a tenant sets
// limits for: a flow key, or model.DefaultFlowKey.
func FlowLimitKeyProblem(key string) string {
	if key == model.DefaultFlowKey {
		return ""
	}
	return FlowKeyProblem(key)
}

// CheckFlowLimit reports what is wrong with l's numbers, each under its
// field of the API's FlowLimitRequest.
func CheckFlowLimit(rep Reporter, l model.FlowLimit) {
	switch {
	case l.Rate < 0 || l.Rate > MaxFlowRate:
		rep.Add("rate", "must be 0 (no rate limit) to %d", MaxFlowRate)
	case l.Period < MinFlowPeriod || l.Period > MaxFlowPeriod:
		rep.Add("period", "must be %s to %s", MinFlowPeriod, MaxFlowPeriod)
	case l.Period%time.Millisecond != 0:
		rep.Add("period", "must be whole milliseconds")
	}
	if l.Parallelism < 0 || l.Parallelism > MaxFlowParallelism {
		rep.Add("parallelism", "must be 0 (no limit) to %d", MaxFlowParallelism)
	}
	if l.Rate == 0 && l.Parallelism == 0 {
		rep.Add("rate", "give rate, parallelism or both; DELETE the key to lift its limits")
	}
}

// FlowLimitQuotaError refuses limits for a new key to a tenant that has
// limits for MaxFlowLimits keys.
type FlowLimitQuotaError struct {
	Limit int
}

func (e *FlowLimitQuotaError) Error() string {
	return fmt.Sprintf("flow limit quota of %d reached", e.Limit)
}

// PutFlowLimit sets the limits of one of the tenant's flow keys (or, for
// model.DefaultFlowKey, of every key without its own), replacing any it
// had, and fills in l's times. l must have passed CheckFlowLimit. created
// says whether the key had no limits before. Dispatchers apply a change to
// the claims they take next. The change is audited as actor's.
func (s *Service) PutFlowLimit(ctx context.Context, tenantID uuid.UUID, l *model.FlowLimit, actor string) (created bool, err error) {
	l.TenantID = tenantID
	created, err = s.store.PutFlowLimit(ctx, l, MaxFlowLimits, func(created bool) *model.AuditEntry {
		action := AuditFlowLimitUpdated
		if created {
			action = AuditFlowLimitCreated
		}
		return auditEntry(tenantID, actor, action, flowLimitDetail(l))
	})
	if errors.Is(err, model.ErrFlowLimitQuota) {
		return false, &FlowLimitQuotaError{Limit: MaxFlowLimits}
	}
	if err != nil {
		return false, fmt.Errorf("put flow limit %q: %w", l.Key, err)
	}
	return created, nil
}

// GetFlowLimit reads the limits of one of the tenant's flow keys:
// model.ErrNotFound when the key has none of its own.
func (s *Service) GetFlowLimit(ctx context.Context, tenantID uuid.UUID, key string) (*model.FlowLimit, error) {
	l, err := s.store.GetFlowLimit(ctx, tenantID, key)
	if err != nil {
		return nil, fmt.Errorf("get flow limit %q: %w", key, err)
	}
	return l, nil
}

// ListFlowLimits reads a page of the tenant's flow limits, in key order.
func (s *Service) ListFlowLimits(ctx context.Context, tenantID uuid.UUID, f model.FlowLimitFilter) ([]*model.FlowLimit, error) {
	ls, err := s.store.ListFlowLimits(ctx, tenantID, f)
	if err != nil {
		return nil, fmt.Errorf("list flow limits of tenant %s: %w", tenantID, err)
	}
	return ls, nil
}

// DeleteFlowLimit lifts the limits of one of the tenant's flow keys and
// returns them as they were: model.ErrNotFound when it had none. The key's
// tasks then go by the default ("*"), if the tenant set one. The change is
// audited as actor's.
func (s *Service) DeleteFlowLimit(ctx context.Context, tenantID uuid.UUID, key string, actor string) (*model.FlowLimit, error) {
	l, err := s.store.DeleteFlowLimit(ctx, tenantID, key,
		auditEntry(tenantID, actor, AuditFlowLimitDeleted, map[string]any{"flow_key": key}))
	if err != nil {
		return nil, fmt.Errorf("delete flow limit %q: %w", key, err)
	}
	return l, nil
}

package model

import (
	"cmp"
	"net/netip"
	"strings"
	"time"
)

// Limits are a tenant's rate limits and quotas. One type serves two
// readings:
//
//   - As set (a tenant's own limits as stored, the node's defaults, and a
//     plan's once plans exist), a zero field is not set: it takes the next
//     layer's value. A negative one (Unlimited) lifts the limit, whatever
//     the layers below say.
//   - Resolved (Resolve), as enforced, a zero field is unlimited: every
//     enforcement point reads resolved limits, and a negative value never
//     survives resolution.
//
// The effective limits of a tenant are, field by field, its own, else its
// plan's, else the node's defaults: tenant.Resolve(plan, nodeDefaults). They
// are computed when the tenant is read, not written when it is created, so
// that a changed node default reaches every tenant without an override.
type Limits struct {
	// APIRate is the tenant's sustained API requests per second.
	APIRate float64 `json:"api_rate,omitempty"`
	// APIBurst is how many API requests may come at once; 0 means the rate
	// (at least 1). Only meaningful with APIRate.
	APIBurst int `json:"api_burst,omitempty"`
	// MaxPendingTasks caps the tasks waiting (scheduled, retrying or
	// dispatching) at once.
	MaxPendingTasks int `json:"max_pending_tasks,omitempty"`
	// MaxSchedules caps the tenant's schedules, paused ones included.
	MaxSchedules int `json:"max_schedules,omitempty"`
	// MaxTimeout caps the tenant's per-attempt timeouts below the node's
	// (stored in nanoseconds). It applies to tasks created before it was
	// lowered too: the dispatcher cuts their attempts to it.
	MaxTimeout time.Duration `json:"max_timeout,omitempty"`
	// DispatchRate caps the webhooks per second to any one target host.
	DispatchRate float64 `json:"dispatch_rate,omitempty"`
	// DispatchConcurrency caps the webhooks in flight to any one target host.
	DispatchConcurrency int `json:"dispatch_concurrency,omitempty"`
	// Targets overrides the dispatch limits for some hosts (lowercase, no port).
	Targets map[string]TargetLimits `json:"targets,omitempty"`
	// TasksPerDay caps the tasks created per UTC day: API creates, batch
	// items, topic publish copies and schedule occurrences alike (callback
	// tasks are not counted).
	TasksPerDay int `json:"tasks_per_day,omitempty"`
	// DeliveriesPerDay caps the webhooks delivered per UTC day; past it the
	// tenant's due tasks wait for the next day.
	DeliveriesPerDay int `json:"deliveries_per_day,omitempty"`
}

// TargetLimits overrides a tenant's dispatch limits for one host. A nil field
// takes the tenant's; a zero one means unlimited for this host.
type TargetLimits struct {
	DispatchRate        *float64 `json:"dispatch_rate,omitempty"`
	DispatchConcurrency *int     `json:"dispatch_concurrency,omitempty"`
}

// Unlimited, set as a field's value, lifts that limit over every layer
// below it: the operator's explicit "no limit" for a tenant, where 0 would
// take the node's default. The admin API spells it 0.
const Unlimited = -1

// Unset reports whether the limits set nothing: as a tenant's own, it takes
// every limit from the layers below; resolved, it limits nothing.
func (l Limits) Unset() bool {
	return l.APIRate == 0 && l.APIBurst == 0 && l.MaxPendingTasks == 0 && l.MaxSchedules == 0 && l.MaxTimeout == 0 && l.DispatchRate == 0 && l.DispatchConcurrency == 0 && len(l.Targets) == 0 && l.TasksPerDay == 0 && l.DeliveriesPerDay == 0
}

// Over returns l with each field it does not set taken from base: the
// layering of a tenant's own limits over its plan's over the node's
// defaults. Per-host overrides go as a whole: the tenant's map if it has
// one, else base's. Negative fields (Unlimited) stay: Resolve lifts them.
func (l Limits) Over(base Limits) Limits {
	out := l
	out.APIRate = cmp.Or(l.APIRate, base.APIRate)
	out.APIBurst = cmp.Or(l.APIBurst, base.APIBurst)
	out.MaxPendingTasks = cmp.Or(l.MaxPendingTasks, base.MaxPendingTasks)
	out.MaxSchedules = cmp.Or(l.MaxSchedules, base.MaxSchedules)
	out.MaxTimeout = cmp.Or(l.MaxTimeout, base.MaxTimeout)
	out.DispatchRate = cmp.Or(l.DispatchRate, base.DispatchRate)
	out.DispatchConcurrency = cmp.Or(l.DispatchConcurrency, base.DispatchConcurrency)
	out.TasksPerDay = cmp.Or(l.TasksPerDay, base.TasksPerDay)
	out.DeliveriesPerDay = cmp.Or(l.DeliveriesPerDay, base.DeliveriesPerDay)
	if out.Targets == nil {
		out.Targets = base.Targets
	}
	return out
}

// Resolve layers l over each of layers in turn (l.Over(layers[0]).Over(
// layers[1])...) and returns the limits to enforce, where 0 is unlimited:
// a field no layer sets, or one set to Unlimited, ends up 0. An API burst
// without an API rate is dropped: it limits nothing alone.
func (l Limits) Resolve(layers ...Limits) Limits {
	out := l
	for _, base := range layers {
		out = out.Over(base)
	}
	out.APIRate = max(0, out.APIRate)
	out.APIBurst = max(0, out.APIBurst)
	out.MaxPendingTasks = max(0, out.MaxPendingTasks)
	out.MaxSchedules = max(0, out.MaxSchedules)
	out.MaxTimeout = max(0, out.MaxTimeout)
	out.DispatchRate = max(0, out.DispatchRate)
	out.DispatchConcurrency = max(0, out.DispatchConcurrency)
	out.TasksPerDay = max(0, out.TasksPerDay)
	out.DeliveriesPerDay = max(0, out.DeliveriesPerDay)
	if out.APIRate == 0 {
		out.APIBurst = 0
	}
	return out
}

// DefaultNodeLimits are the node's defaults for tenants that set no limit of
// their own (HOOKWHEEL_DEFAULT_* changes each): bounds that keep one
// stranger from filling a node or Postgres, yet leave a real application's
// first month of traffic on time: 50 API requests a second in bursts of
// 100; 10,000 pending tasks; 100 schedules; attempts of at most 30 s; and,
// to any one target host, 100 webhooks a second with 20 in flight. No daily
// task or delivery quota: those are a plan's business.
// docs/security.md ("Tenant limits and their defaults") says why each.
func DefaultNodeLimits() Limits {
	return Limits{
		APIRate:             50,
		APIBurst:            100,
		MaxPendingTasks:     10_000,
		MaxSchedules:        100,
		MaxTimeout:          30 * time.Second,
		DispatchRate:        100,
		DispatchConcurrency: 20,
	}
}

// EffectiveAPIBurst is the burst the API limiter applies: APIBurst, or else
// the rate rounded down, and at least 1.
func (l Limits) EffectiveAPIBurst() int {
	if l.APIBurst > 0 {
		return l.APIBurst
	}
	return max(1, int(l.APIRate))
}

// ForHost returns the dispatch rate and concurrency that apply to host
// (a HostKey): its override where it has one, else the tenant's.
func (l Limits) ForHost(host string) (rate float64, concurrency int) {
	rate, concurrency = l.DispatchRate, l.DispatchConcurrency
	if o, ok := l.Targets[host]; ok {
		if o.DispatchRate != nil {
			rate = *o.DispatchRate
		}
		if o.DispatchConcurrency != nil {
			concurrency = *o.DispatchConcurrency
		}
	}
	return rate, concurrency
}

// HostKey is the form of a host name that per-host limits are keyed by:
// lowercase, without the brackets of an IPv6 literal or the trailing dot of a
// fully qualified name, IP addresses in their canonical spelling. ok reports
// whether host is a host name or IP address at all (no scheme, port, path or
// wildcard); the dispatcher looks URLs' hosts up by their key either way.
func HostKey(host string) (key string, ok bool) {
	key = strings.ToLower(host)
	if inner, found := strings.CutPrefix(key, "["); found {
		key, _ = strings.CutSuffix(inner, "]")
	}
	if ip, err := netip.ParseAddr(key); err == nil {
		if ip.Zone() != "" {
			return key, false
		}
		return ip.Unmap().String(), true
	}
	key = strings.TrimSuffix(key, ".")
	if key == "" || len(key) > 253 {
		return key, false
	}
	for label := range strings.SplitSeq(key, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return key, false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return key, false
			}
		}
	}
	return key, true
}

// RateDecision is the API limiter's answer for one request.
type RateDecision struct {
	Allowed bool
	// Limit is the burst: requests allowed at once.
	Limit int
	// Remaining is how many more requests would pass right now.
	Remaining int
	// Reset is how long until the full burst is available again.
	Reset time.Duration
	// RetryAfter is, when refused, how long until this request would pass.
	RetryAfter time.Duration
}

package model

import (
	"net/netip"
	"strings"
	"time"
)

// Limits are a tenant's rate limits and quotas, stored as the admin API
// shows them. A zero field means unlimited.
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
}

// TargetLimits overrides a tenant's dispatch limits for one host. A nil field
// takes the tenant's; a zero one means unlimited for this host.
type TargetLimits struct {
	DispatchRate        *float64 `json:"dispatch_rate,omitempty"`
	DispatchConcurrency *int     `json:"dispatch_concurrency,omitempty"`
}

// Unlimited reports whether the limits limit nothing.
func (l Limits) Unlimited() bool {
	return l.APIRate == 0 && l.MaxPendingTasks == 0 && l.MaxSchedules == 0 && l.MaxTimeout == 0 && l.DispatchRate == 0 && l.DispatchConcurrency == 0 && len(l.Targets) == 0
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

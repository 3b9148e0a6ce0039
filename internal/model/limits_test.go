package model

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimitsForHost(t *testing.T) {
	t.Parallel()
	limits := Limits{
		DispatchRate: 20, DispatchConcurrency: 4,
		Targets: map[string]TargetLimits{
			"fast.example": {DispatchRate: ptrTo(0.0)},
			"slow.example": {DispatchRate: ptrTo(1.0), DispatchConcurrency: ptrTo(1)},
			"half.example": {DispatchConcurrency: ptrTo(2)},
		},
	}
	tests := []struct {
		host        string
		rate        float64
		concurrency int
	}{
		{"other.example", 20, 4},
		{"fast.example", 0, 4},
		{"slow.example", 1, 1},
		{"half.example", 20, 2},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			rate, concurrency := limits.ForHost(tt.host)
			require.Equal(t, tt.rate, rate)
			require.Equal(t, tt.concurrency, concurrency)
		})
	}
	require.Equal(t, 1, Limits{APIRate: 0.5}.EffectiveAPIBurst())
	require.Equal(t, 7, Limits{APIRate: 7.9}.EffectiveAPIBurst())
	require.Equal(t, 3, Limits{APIRate: 7.9, APIBurst: 3}.EffectiveAPIBurst())
}

func TestHostKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		key  string
		ok   bool
	}{
		{"api.partner.com", "api.partner.com", true},
		{"API.Partner.COM", "api.partner.com", true},
		{"api.partner.com.", "api.partner.com", true},
		{"my_host-1.internal", "my_host-1.internal", true},
		{"203.0.113.7", "203.0.113.7", true},
		{"[2001:DB8::1]", "2001:db8::1", true},
		{"2001:0db8:0000::0001", "2001:db8::1", true},
		{"::ffff:203.0.113.7", "203.0.113.7", true},
		{"", "", false},
		{"api.partner.com:443", "api.partner.com:443", false},
		{"https://api.partner.com", "https://api.partner.com", false},
		{"*.partner.com", "*.partner.com", false},
		{"api..partner.com", "api..partner.com", false},
		{"-api.partner.com", "-api.partner.com", false},
		{"bücher.de", "bücher.de", false},
		{"fe80::1%eth0", "fe80::1%eth0", false},
		{strings.Repeat("a", 64) + ".com", strings.Repeat("a", 64) + ".com", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			key, ok := HostKey(tt.host)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.key, key)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestLimitsResolve(t *testing.T) {
	t.Parallel()
	node := Limits{APIRate: 10, APIBurst: 20, MaxPendingTasks: 1000, MaxSchedules: 10, MaxTimeout: 30 * time.Second,
		DispatchRate: 10, DispatchConcurrency: 10}
	plan := Limits{MaxPendingTasks: 50_000, DispatchRate: 100}
	tests := []struct {
		name   string
		own    Limits
		layers []Limits
		want   Limits
	}{
		{"nothing set, no layers: unlimited", Limits{}, nil, Limits{}},
		{"nothing set: the node's", Limits{}, []Limits{node}, node},
		{"own fields win, field by field", Limits{MaxSchedules: 3, APIRate: 1}, []Limits{node},
			Limits{APIRate: 1, APIBurst: 20, MaxPendingTasks: 1000, MaxSchedules: 3, MaxTimeout: 30 * time.Second, DispatchRate: 10, DispatchConcurrency: 10}},
		{"Unlimited lifts over every layer", Limits{MaxPendingTasks: Unlimited, MaxTimeout: Unlimited}, []Limits{plan, node},
			Limits{APIRate: 10, APIBurst: 20, MaxSchedules: 10, DispatchRate: 100, DispatchConcurrency: 10}},
		{"a plan between the tenant and the node", Limits{MaxSchedules: 2}, []Limits{plan, node},
			Limits{APIRate: 10, APIBurst: 20, MaxPendingTasks: 50_000, MaxSchedules: 2, MaxTimeout: 30 * time.Second, DispatchRate: 100, DispatchConcurrency: 10}},
		{"daily quotas layer like the others", Limits{DeliveriesPerDay: Unlimited}, []Limits{{TasksPerDay: 500, DeliveriesPerDay: 900}, node},
			Limits{APIRate: 10, APIBurst: 20, MaxPendingTasks: 1000, MaxSchedules: 10, MaxTimeout: 30 * time.Second, DispatchRate: 10, DispatchConcurrency: 10, TasksPerDay: 500}},
		{"no rate drops the burst", Limits{APIRate: Unlimited}, []Limits{node},
			Limits{MaxPendingTasks: 1000, MaxSchedules: 10, MaxTimeout: 30 * time.Second, DispatchRate: 10, DispatchConcurrency: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.own.Resolve(tt.layers...)
			require.Equal(t, tt.want, got)
			require.Equal(t, got, got.Resolve(), "resolving twice changes nothing")
		})
	}
}

package dispatcher

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// TestTargetLabelsChoose: the busiest targets keep their labels, at most top
// of them; a label moves only to a target more than twice as busy, and goes
// with a target forgotten.
func TestTargetLabelsChoose(t *testing.T) {
	t.Parallel()
	traffic := func(pairs ...any) []targetTraffic {
		var out []targetTraffic
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, targetTraffic{key: pairs[i].(string), traffic: pairs[i+1].(float64)})
		}
		return out
	}
	cases := []struct {
		name   string
		top    int
		before []targetTraffic // chosen from first, when set
		now    []targetTraffic
		want   []string
	}{
		{"every target while there are at most top", 3, nil, traffic("a", 1.0, "b", 0.0, "c", 5.0), []string{"a", "b", "c"}},
		{"the busiest", 2, nil, traffic("a", 1.0, "b", 3.0, "c", 2.0, "d", 0.0), []string{"b", "c"}},
		{"equal traffic: by key", 1, nil, traffic("b", 1.0, "a", 1.0), []string{"a"}},
		{"a label stays against a target less than twice as busy", 1, traffic("a", 10.0),
			traffic("a", 10.0, "b", 19.0), []string{"a"}},
		{"and goes to one more than twice as busy", 1, traffic("a", 10.0),
			traffic("a", 10.0, "b", 21.0), []string{"b"}},
		{"idle targets keep their labels against idle newcomers", 2, traffic("b", 0.0, "c", 0.0),
			traffic("a", 0.0, "b", 0.0, "c", 0.0), []string{"b", "c"}},
		{"a forgotten target loses its label", 2, traffic("a", 10.0, "b", 5.0),
			traffic("b", 5.0, "c", 1.0, "d", 0.5), []string{"b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newTargetLabels(tc.top)
			if tc.before != nil {
				l.choose(tc.before)
			}
			got := slices.Sorted(maps.Keys(l.choose(tc.now)))
			require.Equal(t, tc.want, got)
		})
	}
}

// scrapeTargets gathers the per-target series: name, then label value, then
// the sample.
func scrapeTargets(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]map[string]float64{}
	for _, f := range families {
		series := map[string]float64{}
		for _, m := range f.GetMetric() {
			require.Len(t, m.GetLabel(), 1, f.GetName())
			series[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
		out[f.GetName()] = series
	}
	return out
}

// TestTargetSeriesBounded: a node that has sent to 10,000 distinct hosts,
// half of them with their breaker open, exports hookwheel_breaker_state for
// the 100 busiest and "other" (the most open state of the rest), and counts
// every breaker by state. When the traffic moves to other hosts, the labels
// follow it and the series of the hosts left behind are gone; the series
// never number more than top+1.
func TestTargetSeriesBounded(t *testing.T) {
	t.Parallel()
	const hosts, top = 10_000, 100
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := newTargets(targetsConfig{
		Breaker:     BreakerConfig{ConsecutiveFailures: 1, Cooldown: time.Hour},
		MaxInflight: 1, MaxWaiting: 1, Clock: clk,
	})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(newTargetCollector(ts, top)))
	tenant := uuid.New()
	key := func(i int) string { return fmt.Sprintf("http://host-%05d.example:80", i) }
	for i := range hosts {
		tg := ts.get(key(i), tenant)
		if i%2 == 1 {
			report, err := tg.breaker.Allow()
			require.NoError(t, err)
			report(errTargetFailed)
		}
	}
	// The first five hosts are the busiest (1 and 3 with their breaker
	// open).
	for range 1000 {
		for i := range 5 {
			ts.get(key(i), tenant)
		}
	}

	got := scrapeTargets(t, reg)
	states := got["hookwheel_breaker_state"]
	require.Len(t, states, top+1)
	for i := range 5 {
		require.Contains(t, states, key(i))
	}
	require.Equal(t, 2.0, states[key(1)])
	require.Equal(t, 0.0, states[key(2)])
	require.Equal(t, 2.0, states[otherTargets], "open breakers among the folded")
	require.Equal(t, map[string]float64{"closed": hosts / 2, "half-open": 0, "open": hosts / 2}, got["hookwheel_breakers"])

	// An hour on, a hundred other hosts are the busy ones.
	clk.Advance(time.Hour)
	for range 10 {
		for i := 5000; i < 5000+top; i++ {
			ts.get(key(i), tenant)
		}
	}
	states = scrapeTargets(t, reg)["hookwheel_breaker_state"]
	require.Len(t, states, top+1)
	for i := range 5 {
		require.NotContains(t, states, key(i), "a host that left the busiest keeps no series")
	}
	for i := 5000; i < 5000+top; i++ {
		require.Contains(t, states, key(i))
	}
}

// TestTargetSeriesWithFewTargets: up to top targets, every one has its
// series and there is no "other".
func TestTargetSeriesWithFewTargets(t *testing.T) {
	t.Parallel()
	ts := newTargets(targetsConfig{MaxInflight: 1, MaxWaiting: 1, Clock: clock.NewFake(time.Now())})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(newTargetCollector(ts, 2)))
	ts.get("http://a:80", uuid.New())
	ts.get("http://b:80", uuid.New())
	require.Equal(t, map[string]float64{"http://a:80": 0, "http://b:80": 0}, scrapeTargets(t, reg)["hookwheel_breaker_state"])
}

// TestTenantTargets: each tenant has a breaker and send slots of its own at
// a target, and sees its own: one tenant's failures, stuck sends and full
// slots at a host never defer nor park another tenant's claims there. A
// tenant's target is forgotten IdleAfter after its last claim there, unless
// a send or claim of its own is still there. Before, the target was one for
// every tenant: acme's failures opened globex's breaker, and globex's hung
// send took the slot acme's claim needed.
func TestTenantTargets(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	ts := newTargets(targetsConfig{
		Breaker:     BreakerConfig{ConsecutiveFailures: 2, IdleAfter: time.Minute, StuckAfter: 15 * time.Second, Cooldown: time.Hour},
		MaxInflight: 1, MaxWaiting: 10, Clock: clk,
	})
	const shared, acmeOnly, globexOnly = "https://shared.example:443", "https://acme.example:443", "https://globex.example:443"
	acme, globex := uuid.New(), uuid.New()
	claim := func(tenant uuid.UUID) *model.ClaimedTask {
		return &model.ClaimedTask{Task: model.Task{ID: uuid.New(), TenantID: tenant}}
	}
	send := func(tg *target) func(error) {
		t.Helper()
		report, err := tg.breaker.Allow()
		require.NoError(t, err)
		return ts.sending(tg, report)
	}

	// globex: a send to the shared target waiting for its answer, and a
	// claim waiting for the slot it holds.
	gs := ts.get(shared, globex)
	decision, _ := ts.admit(gs, claim(globex), true)
	require.Equal(t, sendNow, decision)
	send(gs)
	ts.get(shared, globex)
	decision, _ = ts.admit(gs, claim(globex), true)
	require.Equal(t, parked, decision)
	ts.get(globexOnly, globex)

	// acme: its slot at the shared target is its own, free whatever globex
	// holds there; its send there fails; a claim to its own target.
	as := ts.get(shared, acme)
	require.NotSame(t, gs, as)
	decision, _ = ts.admit(as, claim(acme), true)
	require.Equal(t, sendNow, decision, "another tenant's send does not take this tenant's slot")
	send(as)(errTargetFailed)
	require.Nil(t, ts.done(as, time.Millisecond))
	ts.get(acmeOnly, acme)

	require.Equal(t, []TenantTarget{
		{Target: acmeOnly, State: "closed", Since: start, LastUsed: start},
		{Target: shared, State: "closed", Attempts: 1, Failures: 1, Since: start, LastUsed: start},
	}, ts.tenantTargets(acme))
	require.Equal(t, []TenantTarget{
		{Target: globexOnly, State: "closed", Since: start, LastUsed: start},
		{Target: shared, State: "closed", InFlight: 1, Waiting: 1, Attempts: 1, Since: start, LastUsed: start},
	}, ts.tenantTargets(globex))
	require.Empty(t, ts.tenantTargets(uuid.New()), "a tenant that sent nothing here sees nothing")
	statuses := ts.statuses()
	require.Len(t, statuses, 3, "the operator's view has a row per host, the tenants folded")
	require.Equal(t, shared, statuses[2].Target)
	require.Equal(t, 2, statuses[2].Tenants)
	require.Equal(t, 1, statuses[2].InFlight)
	require.Equal(t, 1, statuses[2].Parked)
	require.InDelta(t, 3, statuses[2].RecentClaims, 1e-9)
	require.Equal(t, 4, ts.count(), "one per tenant and target")

	// A minute on, globex's send is stuck: a failure of globex's breaker
	// alone. acme's targets, idle, are forgotten.
	clk.Advance(time.Minute)
	ts.watch()
	require.Empty(t, ts.tenantTargets(acme))
	require.Equal(t, []TenantTarget{
		{Target: shared, State: "closed", InFlight: 1, Waiting: 1, Attempts: 1, Failures: 1, Since: start, LastUsed: start},
	}, ts.tenantTargets(globex))

	// acme fails twice at the shared target: its breaker opens, globex's
	// does not, and globex's claims there are still admitted by it.
	now := clk.Now()
	as = ts.get(shared, acme)
	for range 2 {
		decision, _ = ts.admit(as, claim(acme), true)
		require.Equal(t, sendNow, decision)
		send(as)(errTargetFailed)
		require.Nil(t, ts.done(as, time.Millisecond))
	}
	require.Equal(t, []TenantTarget{
		{Target: shared, State: "open", NextProbeAt: now.Add(time.Hour), Attempts: 2, Failures: 2, Since: now, LastUsed: now},
	}, ts.tenantTargets(acme))
	_, err := gs.breaker.Allow()
	require.NoError(t, err, "another tenant's failures leave this tenant's breaker closed")
	require.Equal(t, "open", ts.statuses()[0].State, "the operator's row shows the most open of its tenants' breakers")
}

// TestTargetKeyHostCase: a host name is one target whatever its case, and a
// missing port is the scheme's default. Before, "EXAMPLE.com" and
// "example.com" had a breaker and slots each.
func TestTargetKeyHostCase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"https://EXAMPLE.com/hook", "https://example.com:443"},
		{"https://example.com:443/other", "https://example.com:443"},
		{"HTTPS://Example.COM/x", "https://example.com:443"},
		{"http://Hooks.Example.com:8080/", "http://hooks.example.com:8080"},
		{"http://example.com", "http://example.com:80"},
		{"http://[2001:DB8::1]:9000/", "http://2001:db8::1:9000"},
	} {
		require.Equal(t, tc.want, targetKey(tc.url), tc.url)
	}
}

package dispatcher

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// A target's host is its tenant's choice, so a series labelled by target is
// a series per host any tenant sends to: one tenant sending to 100,000 hosts
// would make 100,000 series in every Prometheus that scrapes the node, and
// show every tenant's receivers to whoever reads the metrics. So only the
// busiest targets keep a label of their own, and the rest share
// target="other". The whole view is in the API: a tenant's own targets at
// GET /v1/targets, every target at GET /v1/admin/breakers.
//
// The per-target series are gauges made at scrape time from the targets'
// state then (targetCollector), not series kept between scrapes: a target
// that leaves the busiest, or is forgotten, simply has no series in the next
// scrape, and there is nothing to delete, nor any counter to fold. A counter
// labelled by target added later would have to count into "other" whatever
// it counts for a target without a label at that moment, so that "other"
// only goes up, and end a target's series when it loses its label.

// otherTargets is the target label the targets beyond the busiest share.
const otherTargets = "other"

// trafficHalfLife is how fast a target's count of claims fades: a claim
// weighs half after five minutes, a quarter after ten (when an idle target
// is forgotten by default). Short enough that the labels go to the targets
// busy now, long enough that they do not follow every burst.
const trafficHalfLife = 5 * time.Minute

// decayed is a count made at at, as it stands at now: halved every
// trafficHalfLife.
func decayed(count float64, at, now time.Time) float64 {
	if count == 0 {
		return 0
	}
	return count * math.Exp2(-float64(now.Sub(at))/float64(trafficHalfLife))
}

// keepLabelWeight favours the targets that hold a label: a target takes one
// only from a target it is more than keepLabelWeight times as busy as. Two
// targets of about the same traffic at the edge of the busiest would
// otherwise swap labels at every scrape, each swap ending one series and
// starting another.
const keepLabelWeight = 2

// targetTraffic is a target and its recent claims (decayed).
type targetTraffic struct {
	key     string
	traffic float64
}

// targetLabels chooses the targets that keep a label of their own on the
// per-target series: at most top of them, the busiest by recent claims.
// Scrapes may come at once (two Prometheus servers), so it locks.
type targetLabels struct {
	top int

	mu sync.Mutex
	// labelled is the choice of the last call; never changed in place, so
	// the map a call returned stays valid.
	labelled map[string]struct{}
}

func newTargetLabels(top int) *targetLabels {
	return &targetLabels{top: top, labelled: map[string]struct{}{}}
}

// choose returns the targets among all that keep their label. A target
// labelled before keeps it unless more than top targets are busier with its
// traffic weighed keepLabelWeight times; one no longer among all (forgotten)
// loses it.
func (l *targetLabels) choose(all []targetTraffic) map[string]struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(all) <= l.top {
		chosen := make(map[string]struct{}, len(all))
		for _, t := range all {
			chosen[t.key] = struct{}{}
		}
		l.labelled = chosen
		return chosen
	}
	type ranked struct {
		key    string
		weight float64
		held   bool
	}
	list := make([]ranked, len(all))
	for i, t := range all {
		_, held := l.labelled[t.key]
		w := t.traffic
		if held {
			w *= keepLabelWeight
		}
		list[i] = ranked{key: t.key, weight: w, held: held}
	}
	slices.SortFunc(list, func(a, b ranked) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		// At equal weight (idle targets, all at 0) the label stays put.
		if a.held != b.held {
			if a.held {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.key, b.key)
	})
	chosen := make(map[string]struct{}, l.top)
	for _, r := range list[:l.top] {
		chosen[r.key] = struct{}{}
	}
	l.labelled = chosen
	return chosen
}

// targetCollector makes the per-target series when scraped:
// hookwheel_breaker_state for the labelled targets and for "other", each
// the most open of its tenants' breakers, and hookwheel_breakers, the count
// of the tenants' breakers by state, which no folding changes.
type targetCollector struct {
	targets      *targets
	labels       *targetLabels
	breakerState *prometheus.Desc
	breakers     *prometheus.Desc
}

func newTargetCollector(ts *targets, top int) *targetCollector {
	return &targetCollector{
		targets: ts,
		labels:  newTargetLabels(top),
		breakerState: prometheus.NewDesc("hookwheel_breaker_state",
			"Circuit breaker state per target (scheme://host:port), the most open of its tenants' breakers (each tenant has its own): 0 closed, 1 half-open, 2 open. Only the busiest targets by recent claims (HOOKWHEEL_METRICS_TOP_TARGETS) have a series of their own; target=\"other\" is the most open state among the rest.",
			[]string{"target"}, nil),
		breakers: prometheus.NewDesc("hookwheel_breakers",
			"Circuit breakers this node keeps, one per tenant and target, by state: closed, half-open or open.",
			[]string{"state"}, nil),
	}
}

func (c *targetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.breakerState
	ch <- c.breakers
}

func (c *targetCollector) Collect(ch chan<- prometheus.Metric) {
	all := c.targets.snapshot()
	byState := map[gobreaker.State]int{gobreaker.StateClosed: 0, gobreaker.StateHalfOpen: 0, gobreaker.StateOpen: 0}
	for _, s := range all {
		byState[s.state]++
	}
	// One series per host, never per tenant: the tenants' breakers of a
	// host fold into its most open state.
	snap := byHost(all)
	traffic := make([]targetTraffic, len(snap))
	for i, s := range snap {
		traffic[i] = targetTraffic{key: s.key, traffic: s.traffic}
	}
	labelled := c.labels.choose(traffic)
	folded, other := false, gobreaker.StateClosed
	for _, s := range snap {
		if _, ok := labelled[s.key]; ok {
			// A key that is no valid label value (not UTF-8) is folded
			// with the rest rather than failing the scrape.
			if m, err := prometheus.NewConstMetric(c.breakerState, prometheus.GaugeValue, float64(s.state), s.key); err == nil {
				ch <- m
				continue
			}
		}
		folded, other = true, max(other, s.state)
	}
	if folded {
		ch <- prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, float64(other), otherTargets)
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(c.breakers, prometheus.GaugeValue, float64(n), state.String())
	}
}

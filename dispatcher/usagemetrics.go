package dispatcher

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
)

// usageMetrics are the usage totals by plan, never by tenant: the attempts
// this node recorded (as usage_days meters them, per node: sum them over
// the nodes), labelled with the tenant's plan as its claim read it ("none"
// for a tenant without one). A plan's counters are looked up once, then
// kept: the sender adds to them per attempt without a label hash.
type usageMetrics struct {
	attempts, deliveries, failed, sent, received *prometheus.CounterVec

	mu    sync.Mutex
	plans map[string]*planCounters
}

type planCounters struct {
	attempts, deliveries, failed, sent, received prometheus.Counter
}

func newUsageMetrics(reg prometheus.Registerer) (*usageMetrics, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookwheel_usage_" + name + "_total",
			Help: help + " By the tenant's plan; this node's, sum over the nodes."}, []string{"plan"})
	}
	u := &usageMetrics{
		attempts:   vec("attempts", "Attempts recorded by this node's senders."),
		deliveries: vec("deliveries", "Attempts recorded as delivering their task."),
		failed:     vec("failed_attempts", "Attempts recorded that did not deliver."),
		sent:       vec("bytes_sent", "Request body bytes of the attempts recorded."),
		received:   vec("bytes_received", "Answer body bytes read by the attempts recorded."),
		plans:      make(map[string]*planCounters),
	}
	for _, c := range []prometheus.Collector{u.attempts, u.deliveries, u.failed, u.sent, u.received} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register usage metrics: %w", err)
		}
	}
	return u, nil
}

// recorded counts an attempt recorded for a tenant on plan.
func (u *usageMetrics) recorded(plan string, r *model.AttemptResult) {
	if plan == "" {
		plan = "none"
	}
	u.mu.Lock()
	p := u.plans[plan]
	if p == nil {
		p = &planCounters{attempts: u.attempts.WithLabelValues(plan), deliveries: u.deliveries.WithLabelValues(plan),
			failed: u.failed.WithLabelValues(plan), sent: u.sent.WithLabelValues(plan), received: u.received.WithLabelValues(plan)}
		u.plans[plan] = p
	}
	u.mu.Unlock()
	p.attempts.Inc()
	if r.Status == model.StatusDelivered {
		p.deliveries.Inc()
	} else {
		p.failed.Inc()
	}
	p.sent.Add(float64(r.BytesSent))
	p.received.Add(float64(r.BytesReceived))
}

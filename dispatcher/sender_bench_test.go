package dispatcher

import (
	"testing"

	"github.com/google/uuid"
)

// BenchmarkSenderFire sends claims one after the other through the whole
// send path (the tenant's share, the target's slot and breaker, signing,
// the HTTP request to a local receiver, its answer read and the attempt
// built for the recorder), for the time and allocations each fire costs.
// The receiver runs in the same process, so its own allocations count too.
// The claims are one tenant's, as a burst's are.
func BenchmarkSenderFire(b *testing.B) {
	s := setupSender(b, senderOptions{senders: 64, maxPerTarget: 64})
	tenant := uuid.New()
	claims := make(chan struct{})
	go func() {
		for range s.requests {
		}
	}()
	go func() {
		for range s.settled {
		}
	}()
	go func() {
		for range s.records {
			claims <- struct{}{}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		c := s.claim()
		c.TenantID = tenant
		s.claimed <- c
		<-claims
	}
}

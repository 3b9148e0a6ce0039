package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// orderedHit is one webhook of a keyed task as the ordering receiver saw it.
type orderedHit struct {
	key      string
	seq      int
	id       string // webhook-id
	attempt  int
	arrived  time.Time
	finished time.Time
}

// orderingReceiver answers every webhook after a short hold, so that a second
// task of a key sent while the first is still being answered would overlap
// it, and records which of a key's tasks were in flight together.
type orderingReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	inFlight map[string]map[string]bool // key -> webhook-ids being answered
	overlaps []string
	hits     []orderedHit
	progress chan struct{}
}

func newOrderingReceiver(t *testing.T, hold time.Duration) *orderingReceiver {
	r := &orderingReceiver{inFlight: map[string]map[string]bool{}, progress: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Key string `json:"key"`
			Seq int    `json:"seq"`
		}
		raw, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h := orderedHit{key: body.Key, seq: body.Seq, id: req.Header.Get("webhook-id"), arrived: time.Now()}
		h.attempt, _ = strconv.Atoi(req.Header.Get("Hookwheel-Attempt"))
		r.mu.Lock()
		if r.inFlight[h.key] == nil {
			r.inFlight[h.key] = map[string]bool{}
		}
		for other := range r.inFlight[h.key] {
			if other != h.id {
				r.overlaps = append(r.overlaps, fmt.Sprintf("key %s: task %d (%s) arrived while %s was being answered", h.key, h.seq, h.id, other))
			}
		}
		r.inFlight[h.key][h.id] = true
		r.mu.Unlock()

		<-time.After(hold) // the receiver's own work, not a wait for a condition

		r.mu.Lock()
		delete(r.inFlight[h.key], h.id)
		h.finished = time.Now()
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		select {
		case r.progress <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *orderingReceiver) waitDistinct(n int, deadline time.Time) error {
	return waitDistinct(n, deadline, r.progress, func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return countDistinct(r.hits, func(h orderedHit) string { return h.id })
	})
}

// countDistinct counts the distinct webhook-ids among a receiver's hits.
func countDistinct[H any](hits []H, id func(H) string) int {
	ids := map[string]bool{}
	for _, h := range hits {
		ids[id(h)] = true
	}
	return len(ids)
}

// waitDistinct waits until distinct says n tasks have arrived, checking
// again at every sign of progress from the receiver, until deadline.
func waitDistinct(n int, deadline time.Time, progress <-chan struct{}, distinct func() int) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if distinct() >= n {
			return nil
		}
		select {
		case <-progress:
		case <-timer.C:
			return fmt.Errorf("%d of %d tasks arrived by the deadline", distinct(), n)
		}
	}
}

// TestOrderingKeysThreeNodesKilled: three nodes deliver 250 keys of 8 tasks
// each while a node is killed and restarted every 2 to 3 s. No key ever has
// two different tasks at the receiver at once, each key's tasks arrive in
// their order (run_at, then creation: half the keys give every task the same
// run_at), every task arrives, and a task arrives twice only when a kill
// caught it in flight.
func TestOrderingKeysThreeNodesKilled(t *testing.T) {
	t.Parallel()
	const (
		keys   = 250
		perKey = 8
		spread = 10 * time.Second
		hold   = 5 * time.Millisecond
	)
	c := startCluster(t, 3)
	rcv := newOrderingReceiver(t, hold)

	// Each key's tasks go in one batch, in their order, so that tasks due at
	// one instant are created in it.
	t0 := time.Now().Add(15 * time.Second).Truncate(time.Millisecond)
	created := time.Now()
	for k := range keys {
		base := t0.Add(time.Duration(k) * spread / keys)
		items := make([]map[string]any, perKey)
		for seq := range perKey {
			runAt := base
			if k%2 == 1 {
				runAt = base.Add(time.Duration(seq) * 7 * time.Millisecond)
			}
			items[seq] = map[string]any{
				"url":          rcv.URL + "/ordered",
				"body":         fmt.Sprintf(`{"key":"key-%d","seq":%d}`, k, seq),
				"run_at":       runAt.Format(time.RFC3339Nano),
				"ordering_key": fmt.Sprintf("key-%d", k),
			}
		}
		status, body, err := apiCall(context.Background(), http.MethodPost, c.bases[k%len(c.bases)]+"/v1/tasks/batch", c.apiKey,
			map[string]any{"tasks": items}, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	t.Logf("created %d keyed tasks in %s", keys*perKey, time.Since(created).Round(time.Millisecond))
	require.True(t, time.Now().Before(t0), "creating took past the first due time")

	seed := uint64(time.Now().UnixNano())
	t.Logf("killer seed %d", seed)
	var kills []time.Time
	rng := rand.New(rand.NewPCG(seed, seed))
	end := t0.Add(spread)
	next := t0.Add(time.Second)
	for next.Before(end) {
		<-time.After(time.Until(next)) // pacing, not waiting for a condition
		i := rng.IntN(len(c.nodes))
		at, err := c.nodes[i].Kill()
		require.NoError(t, err)
		kills = append(kills, at)
		<-time.After(time.Second) // the node stays down a second
		require.NoError(t, c.nodes[i].Restart(), c.nodes[i].logs.tail(50))
		next = at.Add(2*time.Second + time.Duration(rng.Int64N(int64(time.Second))))
	}

	require.NoError(t, rcv.waitDistinct(keys*perKey, end.Add(90*time.Second)))
	require.NoError(t, waitTasksInStatus(c.bases[0], c.apiKey, "delivered", keys*perKey, time.Now().Add(60*time.Second)))

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	require.Empty(t, len(rcv.overlaps), "two tasks of one key at the receiver at once, first: %v",
		rcv.overlaps[:min(5, len(rcv.overlaps))])
	hits := slices.Clone(rcv.hits)
	slices.SortFunc(hits, func(a, b orderedHit) int { return a.arrived.Compare(b.arrived) })

	firstSeq := map[string][]int{} // key -> seqs in order of first arrival
	seen := map[string]orderedHit{}
	duplicates := 0
	for _, h := range hits {
		if first, dup := seen[h.id]; dup {
			duplicates++
			// A second arrival is a re-send of a task a kill caught in flight:
			// its first arrival lies just before a kill.
			caught := false
			for _, k := range kills {
				if !first.arrived.Before(k.Add(-inFlightWindow)) && !first.arrived.After(k.Add(killSlack)) {
					caught = true
				}
			}
			require.True(t, caught, "task %s of %s arrived twice, the first time at %s, near no kill (%v)", h.id, h.key, first.arrived, kills)
			continue
		}
		seen[h.id] = h
		firstSeq[h.key] = append(firstSeq[h.key], h.seq)
	}
	for key, seqs := range firstSeq {
		for i, seq := range seqs {
			require.Equal(t, i, seq, "key %s: tasks arrived in the order %v", key, seqs)
		}
	}
	t.Logf("%d kills, %d tasks of %d keys in order, %d re-sent after a kill", len(kills), len(seen), len(firstSeq), duplicates)
}

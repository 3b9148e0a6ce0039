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
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// flowHit is one webhook of a flow-keyed task as the flow receiver saw it.
type flowHit struct {
	key     string
	id      string // webhook-id
	arrived time.Time
}

// flowReceiver answers every webhook after a short hold and records, per
// flow key, when each arrived and the most that were being answered at once.
type flowReceiver struct {
	*httptest.Server
	mu          sync.Mutex
	inFlight    map[string]int
	maxInFlight map[string]int
	hits        []flowHit
	progress    chan struct{}
}

func newFlowReceiver(t *testing.T, hold time.Duration) *flowReceiver {
	r := &flowReceiver{inFlight: map[string]int{}, maxInFlight: map[string]int{}, progress: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Key string `json:"key"`
		}
		raw, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h := flowHit{key: body.Key, id: req.Header.Get("webhook-id"), arrived: time.Now()}
		r.mu.Lock()
		r.inFlight[h.key]++
		r.maxInFlight[h.key] = max(r.maxInFlight[h.key], r.inFlight[h.key])
		r.hits = append(r.hits, h)
		r.mu.Unlock()

		<-time.After(hold) // the receiver's own work, not a wait for a condition

		r.mu.Lock()
		r.inFlight[h.key]--
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

func (r *flowReceiver) waitDistinct(n int, deadline time.Time) error {
	return waitDistinct(n, deadline, r.progress, func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return countDistinct(r.hits, func(h flowHit) string { return h.id })
	})
}

// TestFlowKeysThreeNodesKilled: three nodes deliver, while a node is killed
// and restarted every 2 to 3 s, 20 keys of 12 tasks due at once under the
// tenant's default parallelism of 2, and one key of 100 tasks due at once
// at 20 a second. No key ever has more than 2 webhooks at the receiver at
// once, the rated key never gets more than 20 in any second but for one
// slot, and every task arrives.
//
// Not parallel: three more nodes beside the chaos and ordering clusters make
// a two-core machine late enough to fail their failover bounds, which are
// about the nodes, not the machine.
func TestFlowKeysThreeNodesKilled(t *testing.T) {
	const (
		keys        = 20
		perKey      = 12
		parallelism = 2
		rated       = "rated"
		ratedTasks  = 100
		rate        = 20
		hold        = 40 * time.Millisecond
	)
	c := startCluster(t, 3)
	rcv := newFlowReceiver(t, hold)
	ctx := context.Background()
	for key, limit := range map[string]map[string]any{
		"*":   {"parallelism": parallelism},
		rated: {"rate": rate, "period": "1s"},
	} {
		status, body, err := apiCall(ctx, http.MethodPut, c.bases[0]+"/v1/flow-keys/"+key, c.apiKey, limit, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}

	t0 := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
	item := func(key string, i int) map[string]any {
		return map[string]any{
			"url":      rcv.URL + "/flow",
			"body":     fmt.Sprintf(`{"key":%q,"i":%d}`, key, i),
			"run_at":   t0.Format(time.RFC3339Nano),
			"flow_key": key,
			// A key's slot held by a send on a node killed meanwhile comes
			// back when its lease, the timeout plus a margin, runs out: the
			// default 30 s would keep the test waiting that long for nothing,
			// as the receiver answers in 40 ms.
			"timeout": "3s",
		}
	}
	var batches [][]map[string]any
	for k := range keys {
		var items []map[string]any
		for i := range perKey {
			items = append(items, item(fmt.Sprintf("key-%d", k), i))
		}
		batches = append(batches, items)
	}
	var ratedItems []map[string]any
	for i := range ratedTasks {
		ratedItems = append(ratedItems, item(rated, i))
	}
	batches = append(batches, ratedItems)
	for i, items := range batches {
		status, body, err := apiCall(ctx, http.MethodPost, c.bases[i%len(c.bases)]+"/v1/tasks/batch", c.apiKey,
			map[string]any{"tasks": items}, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	require.True(t, time.Now().Before(t0), "creating took past the due time")
	total := keys*perKey + ratedTasks

	seed := uint64(time.Now().UnixNano())
	t.Logf("killer seed %d", seed)
	var kills []time.Time
	rng := rand.New(rand.NewPCG(seed, seed))
	end := t0.Add(ratedTasks / rate * time.Second)
	next := t0.Add(500 * time.Millisecond)
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

	require.NoError(t, rcv.waitDistinct(total, end.Add(90*time.Second)))
	require.NoError(t, waitTasksInStatus(c.bases[0], c.apiKey, "delivered", total, time.Now().Add(60*time.Second)))

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		require.LessOrEqual(t, rcv.maxInFlight[key], parallelism, "key %s had more webhooks in flight than its parallelism", key)
		require.Equal(t, parallelism, rcv.maxInFlight[key], "key %s never used its parallelism: the limit is not what limits", key)
	}
	var arrivals []time.Time
	seen := map[string]bool{}
	for _, h := range rcv.hits {
		if h.key == rated {
			arrivals = append(arrivals, h.arrived)
			seen[h.id] = true
		}
	}
	require.Len(t, seen, ratedTasks)
	// Every send counts, a re-send after a kill included: each took a slot.
	slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, from := range arrivals {
		n, _ := slices.BinarySearchFunc(arrivals[i:], from.Add(time.Second), func(a, b time.Time) int { return a.Compare(b) })
		most = max(most, n)
	}
	require.LessOrEqual(t, most, rate+1, "the rated key got %d webhooks within one second", most)
	took := arrivals[len(arrivals)-1].Sub(arrivals[0])
	t.Logf("%d kills; rated key: %d sends in %s, at most %d in a second; parallelism per key reached %d",
		len(kills), len(arrivals), took.Round(time.Millisecond), most, parallelism)
	require.GreaterOrEqual(t, took, time.Duration(ratedTasks-1)*time.Second/rate-time.Second/rate, "spaced by the rate")
}

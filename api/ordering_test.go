package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOrderingKeyField(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("ordering")

	keyed := h.createTask(tn, `{"url": "https://example.com/a", "ordering_key": "order-1042"}`)
	require.NotNil(t, keyed.OrderingKey)
	require.Equal(t, "order-1042", *keyed.OrderingKey)
	got := h.getTask(tn, keyed.ID)
	require.Equal(t, keyed.OrderingKey, got.OrderingKey)
	bare := h.postTask(tn, `{"url": "https://example.com/b"}`, "")
	require.NotContains(t, rawKeys(t, bare.Body), "ordering_key", "no key, no member")

	tests := []struct {
		name string
		body string
	}{
		{"empty", `{"url": "https://example.com/", "ordering_key": ""}`},
		{"too long", `{"url": "https://example.com/", "ordering_key": "` + strings.Repeat("é", 256) + `"}`},
		{"control character", `{"url": "https://example.com/", "ordering_key": "a\tb"}`},
		{"not a string", `{"url": "https://example.com/", "ordering_key": 42}`},
		{"null", `{"url": "https://example.com/", "ordering_key": null}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "null" {
				// null is leaving it out, as for every optional field of a create.
				created := h.createTask(tn, tc.body)
				require.Nil(t, created.OrderingKey)
				return
			}
			requireFieldProblem(t, h.postTask(tn, tc.body, ""), "ordering_key")
		})
	}
	// 255 characters, not bytes.
	long := h.createTask(tn, `{"url": "https://example.com/", "ordering_key": "`+strings.Repeat("é", 255)+`"}`)
	require.Len(t, []rune(*long.OrderingKey), 255)

	// A batch item's key is its own; a bad one fails that item alone.
	results := h.batch(tn, `{"url": "https://example.com/1", "ordering_key": "k"}`, `{"url": "https://example.com/2", "ordering_key": ""}`)
	require.NotNil(t, results[0].Task)
	require.Equal(t, "k", *results[0].Task.OrderingKey)
	require.NotNil(t, results[1].Error)
	require.Equal(t, "ordering_key", results[1].Error.Errors[0].Field)
}

func TestScheduleOrderingKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("schedule ordering")

	s := h.createSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/", "ordering_key": "nightly"}`)
	require.Equal(t, "nightly", *s.OrderingKey)
	requireFieldProblem(t, h.postSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/", "ordering_key": ""}`), "ordering_key")

	changed := h.mustPatchSchedule(tn, s.ID, `{"ordering_key": "reports"}`)
	require.Equal(t, "reports", *changed.OrderingKey)
	removed := h.mustPatchSchedule(tn, s.ID, `{"ordering_key": null}`)
	require.Nil(t, removed.OrderingKey)
	requireFieldProblem(t, h.patchSchedule(tn, s.ID, `{"ordering_key": ""}`), "ordering_key")
	require.Equal(t, http.StatusOK, h.patchSchedule(tn, s.ID, `{"ordering_key": "again"}`).Status)
}

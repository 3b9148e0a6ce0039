package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// testBatchCommand runs the batch command, as TestClientCommands's
// subtests, against its world.
func testBatchCommand(t *testing.T, w *cliWorld) {
	rcv := w.receiver.URL

	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		prefix := rcv + "/batch/" + uuid.NewString()
		file := filepath.Join(dir, "tasks.jsonl")
		require.NoError(t, os.WriteFile(file, []byte(strings.Join([]string{
			`{"url": "` + prefix + `/1", "delay": "1h", "idempotency_key": "` + prefix + `"}`,
			`{"url": "not a URL"}`,
			``,
			`{"url": "` + prefix + `/3", "runAt": "2030-01-01T00:00:00Z"}`,
			`not JSON`,
			`{"url": "` + prefix + `/1", "delay": "1h", "idempotency_key": "` + prefix + `"}`,
			`{"url": "` + prefix + `/7", "delay": "1h", "body": "hello"}`,
		}, "\n")), 0o600))

		r := w.run(t, "", []string{"batch", file})
		require.Equal(t, exitRefused, r.code, "a batch with failed lines fails: %s", r.stderr)
		require.Contains(t, r.stderr, "3 of 6 line(s) failed; the others are scheduled")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Regexp(t, `^LINE\s+RESULT\s+TASK\s+DETAIL$`, lines[0])
		require.Regexp(t, `^1\s+scheduled\s+\S{36}\s+POST `+prefix+`/1, due \S+ \(in 1h00m\)$`, lines[1])
		require.Regexp(t, `^2\s+failed\s+-\s+422 .*url: `, lines[2])
		require.Regexp(t, `^4\s+failed\s+-\s+not a task .*unknown field "runAt"`, lines[3])
		require.Regexp(t, `^5\s+failed\s+-\s+not a task`, lines[4])
		require.Regexp(t, `^6\s+repeat\s+\S{36}\s+an earlier request had the same idempotency key`, lines[5])
		require.Regexp(t, `^7\s+scheduled\s`, lines[6])
		require.Equal(t, "6 line(s): 3 scheduled (1 of them by an earlier request with the same idempotency key), 3 failed.", lines[8])

		// --json from standard input: one JSON object per line.
		input, err := os.ReadFile(file)
		require.NoError(t, err)
		r = w.run(t, string(input), []string{"batch", "--json", "-"})
		require.Equal(t, exitRefused, r.code)
		var results []batchLineJSON
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var res batchLineJSON
			require.NoError(t, json.Unmarshal([]byte(l), &res), l)
			results = append(results, res)
		}
		require.Len(t, results, 6)
		require.True(t, results[0].Replayed, "the first line's key was used by the run above")
		require.Equal(t, 422, results[1].Error.Status)
		require.Equal(t, "url", results[1].Error.Errors[0].Field)
		require.Equal(t, 7, results[5].Line)
		require.NotNil(t, results[5].Task)

		// More lines than one call takes: sent in chunks, all scheduled.
		var many strings.Builder
		for i := range hookwheel.MaxBatch + 500 {
			fmt.Fprintf(&many, `{"url": "%s/many/%d", "delay": "1h"}`+"\n", prefix, i)
		}
		r = w.run(t, many.String(), []string{"batch", "-"})
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, fmt.Sprintf("%d line(s): %d scheduled, 0 failed.", hookwheel.MaxBatch+500, hookwheel.MaxBatch+500))
		var listed []hookwheel.Task
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--url", prefix+"/many/", "--all", "--json")), &listed))
		require.Len(t, listed, hookwheel.MaxBatch+500)

		// Lines whose bytes pass what one call carries: sent in several
		// calls, each within the server's limit on a batch request.
		var big strings.Builder
		body := strings.Repeat("x", 900<<10)
		for i := range 40 { // 36 MB: more than the 32 MiB one batch request may carry
			fmt.Fprintf(&big, `{"url": "%s/big/%d", "delay": "1h", "body": "%s"}`+"\n", prefix, i, body)
		}
		r = w.run(t, big.String(), []string{"batch", "-"})
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "40 line(s): 40 scheduled, 0 failed.")

		for _, tc := range []struct {
			name, stdin string
			args        []string
		}{
			{"no file", "", []string{"batch"}},
			{"a missing file", "", []string{"batch", filepath.Join(dir, "missing.jsonl")}},
			{"an empty input", "\n\n", []string{"batch", "-"}},
		} {
			r := w.run(t, tc.stdin, tc.args)
			require.Equal(t, exitUsage, r.code, "%s: %s", tc.name, r.stderr)
		}
	})
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const batchUsage = `want: hookwheel batch [--json] FILE
  FILE (- for standard input) holds one task per line, as POST /v1/tasks takes it, with an optional
  idempotency_key: {"url": "https://example.com/hook", "delay": "30s", "body": "..."}, or
  {"topic": "orders", ...} to publish to a topic's endpoints.`

// batchCommand schedules the tasks of a JSON lines file, MaxBatch lines per
// call, and reports each line's result; it fails when any line failed.
func batchCommand(ctx context.Context, args []string, con console) error {
	c := newCommand("batch", batchUsage)
	if err := c.parse(args, con, "FILE"); err != nil {
		return err
	}
	name := c.args[0]
	in := con.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return c.usageError("%v", err)
		}
		defer f.Close()
		in = f
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	report := &batchReport{w: con.stdout, asJSON: *c.asJSON, now: con.now()}
	var (
		chunk      []batchLine
		chunkBytes int
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var reqs []hookwheel.TaskRequest
		var sent []int // indexes in chunk of the lines sent
		for i, l := range chunk {
			if l.err == nil {
				reqs = append(reqs, l.req)
				sent = append(sent, i)
			}
		}
		if len(reqs) > 0 {
			results, err := client.CreateTasks(ctx, reqs)
			if err != nil {
				before := ""
				if report.total > 0 {
					before = fmt.Sprintf(" (the lines before line %d were, as shown above)", chunk[0].line)
				}
				// A refusal (4xx) changed nothing; after a server or network
				// failure the call may have been carried out.
				fate := "were not scheduled"
				if apiErr := (*hookwheel.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode >= 500 {
					fate = "may or may not have been scheduled (list the tasks before sending them again)"
				}
				return fmt.Errorf("lines %d to %d %s, and none after them was sent%s: %w",
					chunk[0].line, chunk[len(chunk)-1].line, fate, before, err)
			}
			for i, r := range results {
				chunk[sent[i]].result = r
			}
		}
		for _, l := range chunk {
			report.add(l)
		}
		chunk, chunkBytes = chunk[:0], 0
		return report.flush()
	}
	scanner := bufio.NewScanner(in)
	// A line holds a task body, which the server takes up to a few MiB.
	scanner.Buffer(make([]byte, 0, 64<<10), 64<<20)
	line := 0
	for scanner.Scan() {
		line++
		text := bytes.TrimSpace(scanner.Bytes())
		if len(text) == 0 {
			continue
		}
		l := batchLine{line: line}
		if err := json.Unmarshal(text, &l.req); err != nil {
			l.err = &hookwheel.Error{Op: fmt.Sprintf("line %d", line), StatusCode: http.StatusBadRequest,
				Title: "invalid line", Detail: "not a task as POST /v1/tasks takes it: " + err.Error()}
		}
		// A call carries at most MaxBatch lines and batchCallBytes of them,
		// well within the server's limit on a batch request's body.
		if len(chunk) > 0 && chunkBytes+len(text) > batchCallBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = append(chunk, l)
		chunkBytes += len(text)
		if len(chunk) == hookwheel.MaxBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := scanner.Err(); err != nil {
		_ = flush()
		return fmt.Errorf("read %s at line %d: %w", name, line+1, err)
	}
	if err := flush(); err != nil {
		return err
	}
	if report.total == 0 {
		return c.usageError("%s holds no task: want one JSON object per line", name)
	}
	if err := report.summary(); err != nil {
		return err
	}
	if report.failed > 0 {
		return fmt.Errorf("%d of %d line(s) failed; the others are scheduled", report.failed, report.total)
	}
	return nil
}

// batchCallBytes bounds the lines one batch call carries: half the 32 MiB a
// server takes in a batch request, leaving room for JSON's escaping.
const batchCallBytes = 16 << 20

// batchLine is one line of a batch file: the task it asks for, and either
// why it could not be read or the API's result.
type batchLine struct {
	line   int
	req    hookwheel.TaskRequest
	err    *hookwheel.Error
	result hookwheel.BatchResult
}

// batchReport prints the result of each line of a batch, a table at a time
// (one per chunk sent) or as JSON lines, and counts them.
type batchReport struct {
	w                       io.Writer
	asJSON                  bool
	now                     time.Time
	lines                   []batchLine
	total, failed, replayed int
	shownHeader             bool
}

func (r *batchReport) add(l batchLine) {
	r.total++
	switch {
	case l.err != nil || l.result.Err != nil:
		r.failed++
	case l.result.Replayed:
		r.replayed++
	}
	r.lines = append(r.lines, l)
}

// batchLineJSON is a line's result in --json output: the line number and
// the task, or the problem.
type batchLineJSON struct {
	Line     int                `json:"line"`
	Task     *hookwheel.Task    `json:"task,omitempty"`
	Publish  *hookwheel.Publish `json:"publish,omitempty"`
	Replayed bool               `json:"replayed,omitempty"`
	Error    *problemJSON       `json:"error,omitempty"`
}

// problemJSON is an *hookwheel.Error as the API spells problems.
type problemJSON struct {
	Type   string                 `json:"type,omitempty"`
	Title  string                 `json:"title"`
	Status int                    `json:"status"`
	Detail string                 `json:"detail,omitempty"`
	Errors []hookwheel.FieldError `json:"errors,omitempty"`
}

func (r *batchReport) flush() error {
	defer func() { r.lines = r.lines[:0] }()
	if r.asJSON {
		enc := json.NewEncoder(r.w)
		for _, l := range r.lines {
			out := batchLineJSON{Line: l.line, Task: l.result.Task, Publish: l.result.Publish, Replayed: l.result.Replayed}
			if e := lineError(l); e != nil {
				out.Error = &problemJSON{Type: e.Type, Title: e.Title, Status: e.StatusCode, Detail: e.Detail, Errors: e.Fields}
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
		}
		return nil
	}
	if len(r.lines) == 0 {
		return nil
	}
	tw := newTable(r.w)
	if !r.shownHeader {
		fmt.Fprintln(tw, "LINE\tRESULT\tTASK\tDETAIL")
		r.shownHeader = true
	}
	for _, l := range r.lines {
		if e := lineError(l); e != nil {
			detail := e.Error()
			if l.err != nil {
				detail = e.Detail // the line number is in the LINE column
			} else {
				detail = strings.TrimPrefix(detail, e.Op+": ")
			}
			fmt.Fprintf(tw, "%d\tfailed\t-\t%s\n", l.line, oneLine(detail, 160))
			continue
		}
		if p := l.result.Publish; p != nil {
			result, detail := "published", fmt.Sprintf("to topic %s: %d task(s), one per endpoint", p.Topic, p.TaskCount)
			if l.result.Replayed {
				result, detail = "repeat", "an earlier request had the same idempotency key: this is its publish, to "+p.Topic
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", l.line, result, p.ID, detail)
			continue
		}
		t := l.result.Task
		result, detail := "scheduled", fmt.Sprintf("%s %s, due %s", t.Method, oneLine(t.URL, 80), when(t.RunAt, r.now))
		if l.result.Replayed {
			result, detail = "repeat", "an earlier request had the same idempotency key: this is its task, "+string(t.Status)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", l.line, result, t.ID, detail)
	}
	return tw.Flush()
}

func lineError(l batchLine) *hookwheel.Error {
	if l.err != nil {
		return l.err
	}
	return l.result.Err
}

func (r *batchReport) summary() error {
	if r.asJSON {
		return nil
	}
	repeats := ""
	if r.replayed > 0 {
		repeats = fmt.Sprintf(" (%d of them by an earlier request with the same idempotency key)", r.replayed)
	}
	_, err := fmt.Fprintf(r.w, "\n%d line(s): %d scheduled%s, %d failed.\n", r.total, r.total-r.failed, repeats, r.failed)
	return err
}

package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/openapi"
)

// The OpenAPI document is the API's contract with every client generated
// from it. These tests check each answer they get from a node against it, so
// that an answer the document does not describe (a field of the wrong type,
// an undeclared status, problem details sent as text) fails the test that
// saw it, not a customer's SDK.

var contract struct {
	once   sync.Once
	router routers.Router
	err    error
}

// contractRouter loads openapi.yaml and its router once per test binary.
func contractRouter() (routers.Router, error) {
	contract.once.Do(func() {
		// Formats the document uses that kin-openapi leaves unchecked unless
		// told how. Ids are UUIDv7, which RFC 4122's pattern would refuse.
		openapi3.DefineStringFormatValidator("uuid", openapi3.NewCallbackValidator(func(s string) error {
			_, err := uuid.Parse(s)
			return err
		}))
		openapi3.DefineStringFormatValidator("uri", openapi3.NewCallbackValidator(func(s string) error {
			u, err := url.Parse(s)
			if err != nil {
				return err
			}
			if !u.IsAbs() {
				return errors.New("not an absolute URI")
			}
			return nil
		}))
		openapi3.DefineStringFormatValidator("uri-reference", openapi3.NewCallbackValidator(func(s string) error {
			_, err := url.Parse(s)
			return err
		}))

		doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
		if err != nil {
			contract.err = fmt.Errorf("load openapi.yaml: %w", err)
			return
		}
		// Nodes listen on ephemeral ports: route by path and method alone.
		doc.Servers = nil
		contract.router, contract.err = legacy.NewRouter(doc)
	})
	return contract.router, contract.err
}

// checkResponse returns why an answer to req does not match the document, or
// nil when it does.
func checkResponse(req *http.Request, status int, header http.Header, body []byte) error {
	router, err := contractRouter()
	if err != nil {
		return err
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no operation in openapi.yaml: %w", err)
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			// A status the operation does not declare (and no default
			// covers) is a mismatch too.
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	})
}

// contractTransport checks every answer that passes through it against the
// document and reports a mismatch as an error of t, the test that made the
// call. The caller still gets the answer, body intact.
type contractTransport struct {
	t    testing.TB
	next http.RoundTripper
}

func (c contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := checkResponse(req, resp.StatusCode, resp.Header, body); err != nil {
		c.t.Errorf("%s %s answered %d, which openapi.yaml does not describe: %v\nbody: %.2000s",
			req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	return resp, nil
}

// contractClient is an HTTP client whose answers are checked against the
// document on behalf of t.
func contractClient(t testing.TB) *http.Client {
	return &http.Client{Transport: contractTransport{t: t, next: http.DefaultTransport}}
}

// TestContractCheck shows what the check accepts and refuses, without a
// node: an answer it let through unread would make every other test's
// check worthless.
func TestContractCheck(t *testing.T) {
	t.Parallel()
	json := http.Header{"Content-Type": {"application/json"}}
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	text := http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}}
	task := `{"id":"01a2021f-503b-7651-aff3-c59e9afa4a43","status":"scheduled","url":"https://example.com/x",` +
		`"method":"POST","run_at":"2026-11-22T10:00:00Z","created_at":"2026-11-22T09:00:00Z","updated_at":"2026-11-22T09:00:00Z",` +
		`"attempts":0,"max_attempts":10,"timeout":"30s","retry":{"max_attempts":10,"min_backoff":"1s","max_backoff":"1h"},` +
		`"next_attempt_at":"2026-11-22T10:00:00Z","last_status_code":null,"last_error":null,"idempotency_key":null}`
	for _, tc := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"a task", http.MethodGet, "/v1/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", 200, json, task, true},
		{"a task without its id", http.MethodGet, "/v1/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", 200, json,
			`{"status":"scheduled"}`, false},
		{"a task id that is no uuid", http.MethodGet, "/v1/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", 200, json,
			strings.Replace(task, "01a2021f-503b-7651-aff3-c59e9afa4a43", "task-1", 1), false},
		{"problem details", http.MethodGet, "/v1/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", 404, problem,
			`{"type":"about:blank","title":"Not Found","status":404,"detail":"no such task"}`, true},
		{"an error as text", http.MethodGet, "/v1/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", 404,
			http.Header{"Content-Type": {"text/plain"}}, "404 page not found", false},
		{"metrics", http.MethodGet, "/metrics", 200, text, "# TYPE up gauge\nup 1\n", true},
		{"metrics as JSON", http.MethodGet, "/metrics", 200, json, `{}`, false},
		{"a status the operation does not declare", http.MethodGet, "/healthz", http.StatusTeapot, problem,
			`{"type":"about:blank","title":"I'm a teapot","status":418,"detail":"no"}`, false},
		{"a path the document does not have", http.MethodGet, "/v1/teapots", 404, problem,
			`{"type":"about:blank","title":"Not Found","status":404,"detail":"no"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = checkResponse(req, tc.status, tc.header, []byte(tc.body))
			if tc.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Error("accepted")
			}
		})
	}
}

package openapi

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// requireTools is set by `make test`, which installs web/node_modules: there
// a missing linter fails the test instead of skipping it.
const requireTools = "HOOKWHEEL_REQUIRE_BROWSER"

// TestRedoclyLint lints openapi.yaml with the Redocly CLI that
// web/package-lock.json pins, under redocly.yaml (the recommended ruleset,
// tightened), and fails on any problem, warnings included.
func TestRedoclyLint(t *testing.T) {
	t.Parallel()
	web, err := filepath.Abs("../web")
	require.NoError(t, err)
	var missing []string
	if _, err := exec.LookPath("npx"); err != nil {
		missing = append(missing, "npx (Node.js)")
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "@redocly", "cli")); err != nil {
		missing = append(missing, "web/node_modules/@redocly/cli (npm ci in web/)")
	}
	if len(missing) > 0 {
		if os.Getenv(requireTools) != "" {
			t.Fatalf("linting openapi.yaml needs %s", strings.Join(missing, ", "))
		}
		t.Skipf("linting openapi.yaml needs %s; `make test` installs them", strings.Join(missing, ", "))
	}

	cmd := exec.Command("npx", "--no-install", "redocly", "lint",
		"--config", "../openapi/redocly.yaml", "--format", "json", "../openapi/"+specFile)
	cmd.Dir = web
	cmd.Env = append(os.Environ(),
		"REDOCLY_TELEMETRY=off",
		"REDOCLY_SUPPRESS_NOTIFICATIONS=true",
		"NO_COLOR=1",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
			Ignored  int `json:"ignored"`
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("redocly lint did not report (%v, %v):\n%s\n%s", runErr, err, stdout.String(), stderr.String())
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	// An ignore file would hide problems from the totals above.
	require.Zero(t, report.Totals.Ignored, "problems ignored by a .redocly.lint-ignore.yaml")
	require.Zero(t, report.Totals.Errors+report.Totals.Warnings, "redocly lint found problems")
	require.NoError(t, runErr, stderr.String())
}

// TestEveryOperationDocumented requires what the reference at /docs and the
// SDKs need of each operation, without Node: a summary, a description, an
// example of its request body and of each success answer with a body, and
// the client errors it may answer.
func TestEveryOperationDocumented(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile(specFile)
	require.NoError(t, err)

	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, path := range paths {
		for method, op := range doc.Paths.Value(path).Operations() {
			name := method + " " + path
			if strings.TrimSpace(op.Summary) == "" {
				t.Errorf("%s has no summary", name)
			}
			if strings.TrimSpace(op.Description) == "" {
				t.Errorf("%s has no description", name)
			}
			if op.RequestBody != nil {
				for mediaType, content := range op.RequestBody.Value.Content {
					if !hasExample(content) {
						t.Errorf("%s: its %s request body has no example", name, mediaType)
					}
				}
			}
			var success, clientError bool
			for code, resp := range op.Responses.Map() {
				switch {
				case strings.HasPrefix(code, "2"):
					success = true
					for mediaType, content := range resp.Value.Content {
						if !hasExample(content) {
							t.Errorf("%s: its %s %s answer has no example", name, code, mediaType)
						}
					}
				case strings.HasPrefix(code, "4"):
					clientError = true
				}
			}
			if !success {
				t.Errorf("%s declares no 2xx answer", name)
			}
			if !clientError {
				t.Errorf("%s declares no 4xx answer", name)
			}
		}
	}
}

func hasExample(m *openapi3.MediaType) bool {
	return m.Example != nil || len(m.Examples) > 0
}

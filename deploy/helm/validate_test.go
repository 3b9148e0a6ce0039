package helm_test

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
)

func newValidator(t *testing.T) validator.Validator {
	t.Helper()
	v, err := validator.New([]string{filepath.Join(schemas.dir, schemaLocation)}, validator.Opts{
		Strict:            true,
		KubernetesVersion: strings.TrimPrefix(kubernetesVersion, "v"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validate runs kubeconform over docs and returns one line per invalid document.
func validate(t *testing.T, docs []string) []string {
	t.Helper()
	schemas.ensure(t, docs)
	v := newValidator(t)
	var problems []string
	for _, doc := range docs {
		for _, res := range v.Validate("manifest", io.NopCloser(strings.NewReader(doc))) {
			switch res.Status {
			case validator.Valid:
			case validator.Empty:
				problems = append(problems, "empty document")
			default:
				msg := res.Err.Error()
				for _, e := range res.ValidationErrors {
					msg += "\n\t" + e.Path + ": " + e.Msg
				}
				name, _ := res.Resource.Signature()
				if name != nil {
					msg = name.Kind + " " + name.Name + ": " + msg
				}
				problems = append(problems, msg)
			}
		}
	}
	return problems
}

func errorsText(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}

// TestManifestsValid renders each value set and validates every manifest against the Kubernetes
// and ServiceMonitor schemas, strictly.
func TestManifestsValid(t *testing.T) {
	t.Parallel()
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			docs, err := render(t, readValues(t, name))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range validate(t, docs) {
				t.Error(p)
			}
		})
	}
}

// TestValidatorRejects proves the validation above can fail: each manifest is wrong in one way.
func TestValidatorRejects(t *testing.T) {
	t.Parallel()
	docs, err := render(t, readValues(t, "full-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	find := func(kind string) string {
		for _, d := range docs {
			if strings.Contains(d, "\nkind: "+kind+"\n") {
				return d
			}
		}
		t.Fatalf("no %s rendered", kind)
		return ""
	}
	deployment, serviceMonitor := find("Deployment"), find("ServiceMonitor")
	cases := []struct{ name, doc, want string }{
		{"unknown field", strings.Replace(deployment, "imagePullPolicy:", "imagePullPolicyy:", 1), "imagePullPolicyy"},
		{"wrong type", strings.Replace(deployment, "maxSurge: 1", "maxSurge: [1]", 1), "maxSurge"},
		{"missing required field", strings.Replace(deployment, "- name: http\n", "- protocolName: http\n", 1), "protocolName"},
		{"unknown kind field", deployment + "\nstatuss: {}\n", "statuss"},
		{"CRD unknown field", strings.Replace(serviceMonitor, "scrapeTimeout:", "scrapeTimeoutt:", 1), "scrapeTimeoutt"},
		{"CRD wrong type", strings.Replace(serviceMonitor, "path: /metrics", "path: [/metrics]", 1), "path"},
		{"wrong apiVersion", strings.Replace(deployment, "apiVersion: apps/v1", "apiVersion: apps/v1beta9", 1), "schema"},
	}
	schemas.ensure(t, docs)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.doc == deployment || tc.doc == serviceMonitor {
				t.Fatal("the case changed nothing: the rendered manifest no longer has what it replaces")
			}
			problems := validate(t, []string{tc.doc})
			if len(problems) == 0 {
				t.Fatalf("kubeconform accepted:\n%s", tc.doc)
			}
			if !strings.Contains(strings.Join(problems, "\n"), tc.want) {
				t.Fatalf("kubeconform: %v, want a problem naming %q", problems, tc.want)
			}
		})
	}
}

// TestValuesSchemaRejects checks values.schema.json turns away values that would make a broken
// install, before anything reaches the cluster.
func TestValuesSchemaRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, set, want string
	}{
		{"misspelt key", "api:\n  replicas: 3\n", "replicas"},
		{"string for an integer", "api:\n  replicaCount: \"3\"\n", "replicaCount"},
		{"unknown log level", "config:\n  logLevel: loud\n", "logLevel"},
		{"bad CIDR", "config:\n  targetAllowCIDRs: [10.0.0.0]\n", "targetAllowCIDRs"},
		{"bad duration", "config:\n  shutdownTimeout: 30 seconds\n", "shutdownTimeout"},
		{"short encryption key", "secret:\n  encryptionKey: c2hvcnQ=\n", "encryptionKey"},
		{"no encryption key", "secret:\n  encryptionKey: \"\"\n", "encryptionKey"},
		{"redis without scheme", "secret:\n  redisUrl: redis:6379\n", "redisUrl"},
		{"brace in the Redis prefix", "config:\n  redisPrefix: \"{hw}:\"\n", "redisPrefix"},
		{"unknown pooler", "config:\n  databasePooler: pgpool\n", "databasePooler"},
		{"retention under a second", "config:\n  retention: 500ms\n", "retention"},
		{"retention of half a second", "config:\n  retention: 0.5s\n", "retention"},
		{"negative retention", "config:\n  retention: -1h\n", "retention"},
		{"transaction pooler without a direct URL", "config:\n  databasePooler: transaction\n", "databaseDirectUrl"},
		{"pgbouncer without a direct URL", "config:\n  databasePooler: pgbouncer\n", "databaseDirectUrl"},
		{"negative preStop sleep", "api:\n  preStopSleepSeconds: -1\n", "preStopSleepSeconds"},
		{"plaintext switch not a boolean", "secret:\n  allowPlaintextSecrets: \"yes\"\n", "allowPlaintextSecrets"},
		{"bad pull policy", "image:\n  pullPolicy: Sometimes\n", "pullPolicy"},
		{"bad memory quantity", "dispatcher:\n  resources:\n    limits:\n      memory: lots\n", "memory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, withValues(t, "minimal-values.yaml", tc.set))
			if err == nil {
				t.Fatalf("values accepted:\n%s", tc.set)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestValuesSchemaAccepts is the other side of TestValuesSchemaRejects: values hookwheel takes pass.
func TestValuesSchemaAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, values, set string }{
		{"retention 0", "minimal-values.yaml", "config:\n  retention: \"0\"\n"},
		{"retention 0s", "minimal-values.yaml", "config:\n  retention: 0s\n"},
		{"retention 1s", "minimal-values.yaml", "config:\n  retention: 1s\n"},
		{"retention 1h30m", "minimal-values.yaml", "config:\n  retention: 1h30m\n"},
		{"retention 1s500ms", "minimal-values.yaml", "config:\n  retention: 1s500ms\n"},
		{"retention 2.5h", "minimal-values.yaml", "config:\n  retention: 2.5h\n"},
		{"transaction pooler with a direct URL", "minimal-values.yaml",
			"config:\n  databasePooler: transaction\nsecret:\n  databaseDirectUrl: postgres://hookwheel@postgres:5432/hookwheel\n"},
		// The Secret is not the chart's to check: its direct URL may well be there.
		{"transaction pooler with an existing Secret", "existing-secret-values.yaml", "config:\n  databasePooler: pgbouncer\n"},
		{"session pooler", "minimal-values.yaml", "config:\n  databasePooler: none\n"},
		{"no encryption key, plaintext asked for", "minimal-values.yaml",
			"secret:\n  encryptionKey: \"\"\n  allowPlaintextSecrets: true\n"},
		{"no preStop sleep", "minimal-values.yaml", "api:\n  preStopSleepSeconds: 0\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := render(t, withValues(t, tc.values, tc.set)); err != nil {
				t.Fatalf("values refused:\n%s\n%v", tc.set, err)
			}
		})
	}
}

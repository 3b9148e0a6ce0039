package helm_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "hookwheel"

// The value sets every test renders: the chart's ci/ files, which chart-testing uses too.
var valueSets = []string{"minimal-values.yaml", "full-values.yaml", "existing-secret-values.yaml"}

// kubeVersion is the cluster version rendered for, the one the schemas come from.
var kubeVersion = &chartutil.KubeVersion{Version: kubernetesVersion, Major: "1", Minor: "37"}

// schemas is the kubeconform schema writer every test shares, in a directory TestMain removes.
var schemas *schemaWriter

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookwheel-chart-schemas-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	schemas = newSchemaWriter(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", name))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// withValues is a value set of ci/ with overrides given as YAML on top.
func withValues(t *testing.T, name, overrides string) map[string]any {
	t.Helper()
	var over map[string]any
	if err := yaml.Unmarshal([]byte(overrides), &over); err != nil {
		t.Fatal(err)
	}
	return chartutil.CoalesceTables(over, readValues(t, name))
}

// render is `helm template`: the release's manifests, hooks included, one YAML document each. It
// loads the chart afresh, so that tests running in parallel share nothing Helm might change.
func render(t *testing.T, vals map[string]any) ([]string, error) {
	t.Helper()
	c := loadChart(t)
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = "hw"
	install.Namespace = "webhooks"
	install.KubeVersion = kubeVersion
	rel, err := install.Run(c, vals)
	if err != nil {
		return nil, err
	}
	manifests := releaseutil.SplitManifests(rel.Manifest)
	docs := make([]string, 0, len(manifests)+len(rel.Hooks))
	for _, k := range slices.Sorted(maps.Keys(manifests)) {
		docs = append(docs, manifests[k])
	}
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
	}
	return docs, nil
}

func TestLint(t *testing.T) {
	t.Parallel()
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lint := action.NewLint()
			lint.Strict = true // warnings fail too
			lint.KubeVersion = kubeVersion
			res := lint.Run([]string{chartDir}, readValues(t, name))
			for _, m := range res.Messages {
				t.Log(m)
			}
			if len(res.Errors) > 0 {
				t.Fatalf("helm lint --strict -f ci/%s: %v", name, res.Errors)
			}
		})
	}
	t.Run("no values", func(t *testing.T) {
		t.Parallel()
		// The database, Redis and encryption key have no usable default: lint says so.
		res := action.NewLint().Run([]string{chartDir}, nil)
		if len(res.Errors) == 0 || !strings.Contains(errorsText(res.Errors), "databaseUrl") {
			t.Fatalf("helm lint without values: errors %v, want one about secret.databaseUrl", res.Errors)
		}
	})
}

type rendered struct {
	docs []string
	byKN map[string]string // "Kind/name" → document
}

func renderSet(t *testing.T, name string) rendered {
	t.Helper()
	return renderValues(t, readValues(t, name))
}

func renderValues(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	docs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{docs: docs, byKN: map[string]string{}}
	for _, d := range docs {
		var head struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(d), &head); err != nil {
			t.Fatal(err)
		}
		r.byKN[head.Kind+"/"+head.Metadata.Name] = d
	}
	return r
}

func (r rendered) kinds() []string { return slices.Sorted(maps.Keys(r.byKN)) }

func (r rendered) decode(t *testing.T, kindName string, into any) {
	t.Helper()
	d, ok := r.byKN[kindName]
	if !ok {
		t.Fatalf("%s not rendered; have %v", kindName, r.kinds())
	}
	if err := yaml.UnmarshalStrict([]byte(d), into); err != nil {
		t.Fatalf("%s: %v", kindName, err)
	}
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

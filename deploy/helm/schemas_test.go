package helm_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// kubeconform wants one JSON schema per kind, which it normally downloads from GitHub. Here they
// are made from sources the Go module proxy serves, so the tests need no other network:
//
//   - Kubernetes' own OpenAPI v3 documents, api/openapi-spec/v3 in the k8s.io/kubernetes module
//     (about 22 MB, downloaded once into the module cache);
//   - the ServiceMonitor CRD's openAPIV3Schema, in the prometheus-operator module (about 4 MB).
//
// Neither module is imported (k8s.io/kubernetes cannot be, outside its own repository), so go.mod
// does not list them: `go mod download` fetches each pinned version and the test checks its hash.
const (
	kubernetesModule  = "k8s.io/kubernetes"
	kubernetesVersion = "v1.37.2"
	kubernetesSum     = "h1:A2VDEiObzkYqFTKhSsn0ZEb0RlLEXpHWj93gi2HqEwE="

	prometheusOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	prometheusOperatorVersion = "v0.85.0"
	prometheusOperatorSum     = "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="
)

// schemaLocation is where kubeconform finds the schema of a kind, in its own naming
// (deployment-apps-v1.json, service-v1.json, servicemonitor-monitoring-v1.json).
const schemaLocation = "{{ .ResourceKind }}{{ .KindSuffix }}.json"

type gvk struct{ group, version, kind string }

func gvkOf(apiVersion, kind string) gvk {
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	return gvk{group, version, kind}
}

func (g gvk) apiVersion() string {
	if g.group == "" {
		return g.version
	}
	return g.group + "/" + g.version
}

// fileName is kubeconform's name for the kind's schema: see schemaLocation.
func (g gvk) fileName() string {
	suffix := ""
	if g.group != "" {
		suffix = "-" + strings.ToLower(strings.Split(g.group, ".")[0])
	}
	return strings.ToLower(g.kind) + suffix + "-" + strings.ToLower(g.version) + ".json"
}

// moduleDir downloads module@version through the Go module proxy (a no-op once it is in the module
// cache), checks it is the pinned one, and returns its directory.
func moduleDir(t *testing.T, module, version, sum string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module+"@"+version).Output()
	var info struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil {
		t.Fatalf("go mod download %s@%s: %v (%v)", module, version, err, jerr)
	}
	if info.Error != "" || err != nil {
		t.Fatalf("go mod download %s@%s: %v %s", module, version, err, info.Error)
	}
	if info.Sum != sum {
		t.Fatalf("%s@%s has hash %s, want %s", module, version, info.Sum, sum)
	}
	return info.Dir
}

// schemaWriter writes kubeconform schemas, strict (no field a schema does not name), for the kinds
// asked for. One serves every test (see TestMain), so that Kubernetes' OpenAPI documents are read and
// each kind converted once however many tests run in parallel; the mutex orders them.
type schemaWriter struct {
	dir string

	mu         sync.Mutex
	k8sDir     string
	promDir    string
	openAPIDoc map[string]map[string]any // file name → its components.schemas
	written    map[gvk]bool
}

func newSchemaWriter(dir string) *schemaWriter {
	return &schemaWriter{dir: dir, openAPIDoc: map[string]map[string]any{}, written: map[gvk]bool{}}
}

// ensure writes the schemas of the kinds of docs (rendered manifests) that are not written yet. A
// schema is complete on disk once ensure returns, so a validator made afterwards may read it while
// other tests write theirs.
func (w *schemaWriter) ensure(t *testing.T, docs []string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, doc := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
			continue // kubeconform reports it
		}
		g := gvkOf(head.APIVersion, head.Kind)
		if w.written[g] {
			continue
		}
		var schema map[string]any
		var err error
		if g.group == "monitoring.coreos.com" {
			schema, err = w.crdSchema(t, g)
		} else {
			schema, err = w.kubernetesSchema(t, g)
		}
		if err != nil {
			// Left to kubeconform, which fails a document whose schema it cannot find.
			t.Logf("no schema for %s %s: %v", g.apiVersion(), g.kind, err)
			continue
		}
		b, err := json.Marshal(schema)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.dir, g.fileName()), b, 0o644); err != nil {
			t.Fatal(err)
		}
		w.written[g] = true
	}
}

// kubernetesSchema is the kind's schema from Kubernetes' OpenAPI v3 document of its group version,
// with every definition it refers to under components.schemas, so that its "#/components/schemas/…"
// references resolve inside the one file.
func (w *schemaWriter) kubernetesSchema(t *testing.T, g gvk) (map[string]any, error) {
	if w.k8sDir == "" {
		w.k8sDir = moduleDir(t, kubernetesModule, kubernetesVersion, kubernetesSum)
	}
	file := "api__v1_openapi.json"
	if g.group != "" {
		file = fmt.Sprintf("apis__%s__%s_openapi.json", g.group, g.version)
	}
	defs, ok := w.openAPIDoc[file]
	if !ok {
		b, err := os.ReadFile(filepath.Join(w.k8sDir, "api", "openapi-spec", "v3", file))
		if err != nil {
			return nil, err
		}
		var doc struct {
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		defs = doc.Components.Schemas
		w.openAPIDoc[file] = defs
	}
	var name string
	for n, d := range defs {
		gvks, _ := d.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
		if len(gvks) != 1 {
			continue // DeleteOptions and the like belong to every group
		}
		m := gvks[0].(map[string]any)
		if m["group"] == g.group && m["version"] == g.version && m["kind"] == g.kind {
			name = n
		}
	}
	if name == "" {
		return nil, fmt.Errorf("no such kind in Kubernetes %s", kubernetesVersion)
	}
	const prefix = "#/components/schemas/"
	reachable := map[string]any{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, prefix) {
				n := strings.TrimPrefix(ref, prefix)
				if _, seen := reachable[n]; !seen {
					reachable[n] = strict(defs[n])
					walk(defs[n])
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(defs[name])
	root := withKind(strict(defs[name]), g)
	root["components"] = map[string]any{"schemas": reachable}
	return root, nil
}

// crdSchema is the openAPIV3Schema of prometheus-operator's CRD for the kind, as the API server
// would enforce it (it prunes unknown fields; kubeconform rejects them).
func (w *schemaWriter) crdSchema(t *testing.T, g gvk) (map[string]any, error) {
	if w.promDir == "" {
		w.promDir = moduleDir(t, prometheusOperatorModule, prometheusOperatorVersion, prometheusOperatorSum)
	}
	file := filepath.Join(w.promDir, "example", "prometheus-operator-crd",
		fmt.Sprintf("%s_%ss.yaml", g.group, strings.ToLower(g.kind)))
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Group    string `json:"group"`
			Names    struct{ Kind string }
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if crd.Spec.Group != g.group || crd.Spec.Names.Kind != g.kind {
		return nil, fmt.Errorf("%s defines %s %s", file, crd.Spec.Group, crd.Spec.Names.Kind)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == g.version {
			return withKind(strict(v.Schema.OpenAPIV3Schema), g), nil
		}
	}
	return nil, fmt.Errorf("%s has no version %s", file, g.version)
}

// withKind pins apiVersion and kind, as kubeconform's own schemas do.
func withKind(s map[string]any, g gvk) map[string]any {
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		s["properties"] = props
	}
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{g.apiVersion()}}
	props["kind"] = map[string]any{"type": "string", "enum": []any{g.kind}}
	return s
}

// strict copies an OpenAPI schema, forbidding properties it does not name in every object that
// names its properties, unless it says x-kubernetes-preserve-unknown-fields.
func strict(v any) map[string]any {
	in, _ := v.(map[string]any)
	out := make(map[string]any, len(in)+1)
	for k, x := range in {
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range x.(map[string]any) {
				props[name] = strict(p)
			}
			out[k] = props
		case "additionalProperties", "items", "not":
			if m, ok := x.(map[string]any); ok {
				out[k] = strict(m)
			} else {
				out[k] = x
			}
		case "allOf", "anyOf", "oneOf":
			list := []any{}
			for _, s := range x.([]any) {
				list = append(list, strict(s))
			}
			out[k] = list
		default:
			out[k] = x
		}
	}
	_, hasProps := in["properties"]
	_, hasAdditional := in["additionalProperties"]
	if hasProps && !hasAdditional && in["x-kubernetes-preserve-unknown-fields"] != true {
		out["additionalProperties"] = false
	}
	return out
}

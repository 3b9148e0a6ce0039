package helm_test

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestWhatRenders checks the chart's promises beyond schema validity: the commands, the probes,
// the hook, the Secret wiring, the hardening, and which optional parts each value set turns on.
func TestWhatRenders(t *testing.T) {
	t.Parallel()
	t.Run("minimal", func(t *testing.T) {
		t.Parallel()
		r := renderSet(t, "minimal-values.yaml")
		want := []string{
			"Deployment/hw-hookwheel-api", "Deployment/hw-hookwheel-dispatcher", "Job/hw-hookwheel-migrate",
			"PodDisruptionBudget/hw-hookwheel-api", "PodDisruptionBudget/hw-hookwheel-dispatcher",
			"Secret/hw-hookwheel", "Secret/hw-hookwheel-migrate", "Service/hw-hookwheel",
			"Service/hw-hookwheel-metrics", "ServiceAccount/hw-hookwheel",
		}
		if got := r.kinds(); !slices.Equal(got, want) {
			t.Fatalf("rendered %v, want %v", got, want)
		}
		for _, component := range []string{"api", "dispatcher"} {
			var d appsv1.Deployment
			r.decode(t, "Deployment/hw-hookwheel-"+component, &d)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("%s replicas %v, want 2", component, d.Spec.Replicas)
			}
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if want := []string{"serve", "--" + component + "-only", "--no-migrate"}; !slices.Equal(c.Args, want) {
				t.Errorf("%s args %v, want %v", component, c.Args, want)
			}
			if c.Image != "hookwheel:0.1.0" {
				t.Errorf("%s image %s", component, c.Image)
			}
			if p := c.LivenessProbe.HTTPGet; p == nil || p.Path != "/healthz" || p.Port.StrVal != "http" {
				t.Errorf("%s liveness %+v", component, c.LivenessProbe)
			}
			if p := c.ReadinessProbe.HTTPGet; p == nil || p.Path != "/readyz" {
				t.Errorf("%s readiness %+v", component, c.ReadinessProbe)
			}
			sc := c.SecurityContext
			if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
				!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s container securityContext %+v", component, sc)
			}
			if psc := pod.SecurityContext; psc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 10001 {
				t.Errorf("%s pod securityContext %+v", component, psc)
			}
			if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
				t.Errorf("%s resources %+v", component, c.Resources)
			}
			env := envOf(c)
			for name, key := range map[string]string{
				"DATABASE_URL": "DATABASE_URL", "REDIS_URL": "REDIS_URL", "HOOKWHEEL_ENCRYPTION_KEY": "HOOKWHEEL_ENCRYPTION_KEY",
				"HOOKWHEEL_ADMIN_TOKEN": "HOOKWHEEL_ADMIN_TOKEN", "HOOKWHEEL_SESSION_KEY": "HOOKWHEEL_SESSION_KEY",
				"HOOKWHEEL_DATABASE_DIRECT_URL": "HOOKWHEEL_DATABASE_DIRECT_URL",
			} {
				ref := env[name].ValueFrom
				if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "hw-hookwheel" || ref.SecretKeyRef.Key != key {
					t.Errorf("%s env %s = %+v, want secret hw-hookwheel key %s", component, name, env[name], key)
				}
			}
			if env["HOOKWHEEL_METRICS_ADDR"].Value != ":9090" || env["HOOKWHEEL_ALLOW_PRIVATE_TARGETS"].Value != "false" {
				t.Errorf("%s env %+v", component, c.Env)
			}
			if ref := env["HOOKWHEEL_ENCRYPTION_KEY"].ValueFrom.SecretKeyRef; ref.Optional != nil && *ref.Optional {
				t.Errorf("%s reads the encryption key as optional", component)
			}
			if _, ok := d.Spec.Template.Annotations["checksum/secret"]; !ok {
				t.Errorf("%s pods do not roll when the Secret changes", component)
			}
		}
		var secret corev1.Secret
		r.decode(t, "Secret/hw-hookwheel", &secret)
		if len(secret.StringData) != 3 || secret.StringData["REDIS_URL"] != "redis://redis:6379/0" {
			t.Errorf("Secret holds %v, want the three values given", slices.Sorted(maps.Keys(secret.StringData)))
		}
		var job batchv1.Job
		r.decode(t, "Job/hw-hookwheel-migrate", &job)
		if h := job.Annotations["helm.sh/hook"]; h != "pre-install,pre-upgrade" {
			t.Errorf("Job hook %q", h)
		}
		jc := job.Spec.Template.Spec.Containers[0]
		if !slices.Equal(jc.Args, []string{"migrate"}) {
			t.Errorf("Job args %v", jc.Args)
		}
		if ref := envOf(jc)["DATABASE_URL"].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "hw-hookwheel-migrate" {
			t.Errorf("Job reads DATABASE_URL from %+v, want the hook's own Secret", ref)
		}
		var hookSecret corev1.Secret
		r.decode(t, "Secret/hw-hookwheel-migrate", &hookSecret)
		if w := hookSecret.Annotations["helm.sh/hook-weight"]; w != "-10" {
			t.Errorf("the Job's Secret has hook weight %q, want it made before the Job", w)
		}
	})

	t.Run("full", func(t *testing.T) {
		t.Parallel()
		r := renderSet(t, "full-values.yaml")
		for _, kn := range []string{"HorizontalPodAutoscaler/hw-hookwheel-api", "ServiceMonitor/hw-hookwheel",
			"ConfigMap/hw-hookwheel-dashboard"} {
			if _, ok := r.byKN[kn]; !ok {
				t.Errorf("%s not rendered; have %v", kn, r.kinds())
			}
		}
		var api, dispatcher appsv1.Deployment
		r.decode(t, "Deployment/hw-hookwheel-api", &api)
		r.decode(t, "Deployment/hw-hookwheel-dispatcher", &dispatcher)
		if api.Spec.Replicas != nil {
			t.Errorf("the autoscaled API Deployment sets replicas %d: each upgrade would undo the autoscaler", *api.Spec.Replicas)
		}
		if *dispatcher.Spec.Replicas != 4 {
			t.Errorf("dispatcher replicas %d, want 4", *dispatcher.Spec.Replicas)
		}
		env := envOf(api.Spec.Template.Spec.Containers[0])
		for name, want := range map[string]string{
			"HOOKWHEEL_TARGET_ALLOW_CIDRS": "10.20.0.0/16,fd00::/8", "HOOKWHEEL_TRUSTED_PROXIES": "10.0.0.0/8",
			"HOOKWHEEL_RETENTION": "720h", "HOOKWHEEL_SENDERS": "2048", "HOOKWHEEL_MAX_TIMEOUT": "2m",
			"HOOKWHEEL_HTTP_MAX_CONNS": "20000", "HOOKWHEEL_REDIS_PREFIX": "prod:",
		} {
			if env[name].Value != want {
				t.Errorf("API env %s = %q, want %q", name, env[name].Value, want)
			}
		}
		if _, ok := envOf(dispatcher.Spec.Template.Spec.Containers[0])["HOOKWHEEL_HTTP_MAX_CONNS"]; ok {
			t.Error("the API's extraEnv reached the dispatcher")
		}
		if got := api.Spec.Template.Spec.TopologySpreadConstraints; len(got) != 1 || got[0].TopologyKey != "topology.kubernetes.io/zone" ||
			got[0].LabelSelector.MatchLabels["app.kubernetes.io/component"] != "api" {
			t.Errorf("API topology spread %+v", got)
		}
		if got := dispatcher.Spec.Template.Spec.NodeSelector["example.com/pool"]; got != "dispatch" {
			t.Errorf("dispatcher nodeSelector %v", dispatcher.Spec.Template.Spec.NodeSelector)
		}
		if a := api.Spec.Template.Annotations; a["example.com/component"] != "api" || a["example.com/team"] != "platform" {
			t.Errorf("API pod annotations %v", a)
		}
		var cm corev1.ConfigMap
		r.decode(t, "ConfigMap/hw-hookwheel-dashboard", &cm)
		repo, err := os.ReadFile("../grafana/hookwheel.json")
		if err != nil {
			t.Fatal(err)
		}
		if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "monitoring" ||
			cm.Data["hookwheel.json"] != strings.TrimSpace(string(repo)) {
			t.Errorf("dashboard ConfigMap: labels %v, namespace %s, same dashboard %v", cm.Labels, cm.Namespace,
				cm.Data["hookwheel.json"] == strings.TrimSpace(string(repo)))
		}
		var job batchv1.Job
		r.decode(t, "Job/hw-hookwheel-migrate", &job)
		if sa := job.Spec.Template.Spec.ServiceAccountName; sa != "hookwheel-migrate" {
			t.Errorf("Job service account %q", sa)
		}
		jobEnv := envOf(job.Spec.Template.Spec.Containers[0])
		if _, ok := jobEnv["HOOKWHEEL_DATABASE_DIRECT_URL"]; !ok || jobEnv["HOOKWHEEL_DATABASE_POOLER"].Value != "transaction" {
			t.Errorf("the Job does not get the direct database URL it migrates through, or the pooler setting: %+v", jobEnv)
		}
	})

	t.Run("existing secret", func(t *testing.T) {
		t.Parallel()
		r := renderSet(t, "existing-secret-values.yaml")
		for kn := range r.byKN {
			if strings.HasPrefix(kn, "Secret/") || strings.HasPrefix(kn, "ServiceAccount/") {
				t.Errorf("%s rendered with an existing Secret and service account", kn)
			}
		}
		var d appsv1.Deployment
		r.decode(t, "Deployment/hw-hookwheel-dispatcher", &d)
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "hookwheel" {
			t.Errorf("service account %q, want the existing hookwheel", sa)
		}
		env := envOf(d.Spec.Template.Spec.Containers[0])
		for name, key := range map[string]string{"DATABASE_URL": "database-url", "REDIS_URL": "redis-url",
			"HOOKWHEEL_ENCRYPTION_KEY": "encryption-key", "HOOKWHEEL_ADMIN_TOKEN": "HOOKWHEEL_ADMIN_TOKEN"} {
			ref := env[name].ValueFrom.SecretKeyRef
			if ref.Name != "hookwheel-credentials" || ref.Key != key {
				t.Errorf("env %s from %s/%s, want hookwheel-credentials/%s", name, ref.Name, ref.Key, key)
			}
			// Without the encryption key new signing secrets would be stored in plaintext and
			// sealed ones could not be opened: the pod must not start rather than start that way.
			required := name == "DATABASE_URL" || name == "REDIS_URL" || name == "HOOKWHEEL_ENCRYPTION_KEY"
			if optional := ref.Optional != nil && *ref.Optional; optional == required {
				t.Errorf("env %s optional %v", name, optional)
			}
		}
		var job batchv1.Job
		r.decode(t, "Job/hw-hookwheel-migrate", &job)
		if ref := envOf(job.Spec.Template.Spec.Containers[0])["DATABASE_URL"].ValueFrom.SecretKeyRef; ref.Name != "hookwheel-credentials" {
			t.Errorf("Job reads DATABASE_URL from %s", ref.Name)
		}
		if sa := job.Spec.Template.Spec.ServiceAccountName; sa != "hookwheel" {
			t.Errorf("Job service account %q, want the existing hookwheel", sa)
		}
	})
}

// TestPlaintextSecrets: only secret.allowPlaintextSecrets lets pods run without an encryption key.
func TestPlaintextSecrets(t *testing.T) {
	t.Parallel()
	encryptionKeyRef := func(t *testing.T, r rendered) *corev1.SecretKeySelector {
		t.Helper()
		var d appsv1.Deployment
		r.decode(t, "Deployment/hw-hookwheel-dispatcher", &d)
		ref := envOf(d.Spec.Template.Spec.Containers[0])["HOOKWHEEL_ENCRYPTION_KEY"].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil {
			t.Fatal("HOOKWHEEL_ENCRYPTION_KEY is not read from the Secret")
		}
		return ref.SecretKeyRef
	}
	t.Run("existing secret", func(t *testing.T) {
		t.Parallel()
		r := renderValues(t, withValues(t, "existing-secret-values.yaml", "secret:\n  allowPlaintextSecrets: true\n"))
		if ref := encryptionKeyRef(t, r); ref.Optional == nil || !*ref.Optional {
			t.Errorf("with allowPlaintextSecrets the encryption key is still required: %+v", ref)
		}
	})
	t.Run("chart's secret without a key", func(t *testing.T) {
		t.Parallel()
		r := renderValues(t, withValues(t, "minimal-values.yaml",
			"secret:\n  encryptionKey: \"\"\n  allowPlaintextSecrets: true\n"))
		if ref := encryptionKeyRef(t, r); ref.Optional == nil || !*ref.Optional {
			t.Errorf("the key is left out of the Secret but read as required: %+v", ref)
		}
		var secret corev1.Secret
		r.decode(t, "Secret/hw-hookwheel", &secret)
		if _, ok := secret.StringData["HOOKWHEEL_ENCRYPTION_KEY"]; ok {
			t.Errorf("Secret holds an empty encryption key: %v", slices.Sorted(maps.Keys(secret.StringData)))
		}
	})
	t.Run("chart's secret with a key", func(t *testing.T) {
		t.Parallel()
		r := renderValues(t, withValues(t, "minimal-values.yaml", "secret:\n  allowPlaintextSecrets: true\n"))
		var secret corev1.Secret
		r.decode(t, "Secret/hw-hookwheel", &secret)
		if secret.StringData["HOOKWHEEL_ENCRYPTION_KEY"] == "" {
			t.Error("the encryption key given was left out of the Secret")
		}
	})
}

// TestShutdown: a terminating API pod keeps serving while its endpoints are withdrawn, then has the
// time to finish what is in flight before Kubernetes kills it.
func TestShutdown(t *testing.T) {
	t.Parallel()
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := renderSet(t, name)
			for _, component := range []string{"api", "dispatcher"} {
				var d appsv1.Deployment
				r.decode(t, "Deployment/hw-hookwheel-"+component, &d)
				pod := d.Spec.Template.Spec
				c := pod.Containers[0]
				var preStop time.Duration
				if component == "api" {
					h := c.Lifecycle
					if h == nil || h.PreStop == nil || h.PreStop.Exec == nil || len(h.PreStop.Exec.Command) != 2 ||
						h.PreStop.Exec.Command[0] != "sleep" {
						t.Fatalf("API preStop %+v, want sleep", h)
					}
					n, err := strconv.Atoi(h.PreStop.Exec.Command[1])
					if err != nil || n < 1 {
						t.Fatalf("API preStop sleeps %q", h.PreStop.Exec.Command[1])
					}
					preStop = time.Duration(n) * time.Second
				} else if c.Lifecycle != nil {
					t.Errorf("the dispatcher, which no Service routes to, has a preStop hook: %+v", c.Lifecycle)
				}
				// hookwheel's own default; then up to 5 s more for the metrics listener
				// (opsShutdownTimeout in cmd/hookwheel/internal/app).
				shutdown := 30 * time.Second
				if v := envOf(c)["HOOKWHEEL_SHUTDOWN_TIMEOUT"].Value; v != "" {
					var err error
					if shutdown, err = time.ParseDuration(v); err != nil {
						t.Fatal(err)
					}
				}
				need := preStop + shutdown + 5*time.Second
				grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
				if grace <= need {
					t.Errorf("%s terminationGracePeriodSeconds %v, want above preStop %v + shutdown %v + 5s",
						component, grace, preStop, shutdown)
				}
			}
		})
	}
	t.Run("no preStop sleep", func(t *testing.T) {
		t.Parallel()
		r := renderValues(t, withValues(t, "minimal-values.yaml", "api:\n  preStopSleepSeconds: 0\n"))
		var d appsv1.Deployment
		r.decode(t, "Deployment/hw-hookwheel-api", &d)
		if l := d.Spec.Template.Spec.Containers[0].Lifecycle; l != nil {
			t.Errorf("preStopSleepSeconds 0 renders %+v", l)
		}
	})
}

// TestGoMemLimit: GOMEMLIMIT is 90 % of the container's memory limit, whatever its unit; at 100 %
// the kernel kills the pod before the Go runtime's soft limit can hold the heap back.
func TestGoMemLimit(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, what string, c corev1.Container) {
		t.Helper()
		limit := c.Resources.Limits.Memory()
		env, ok := envOf(c)["GOMEMLIMIT"]
		if limit.IsZero() {
			if ok {
				t.Errorf("%s: GOMEMLIMIT %+v without a memory limit", what, env)
			}
			return
		}
		got, err := strconv.ParseInt(env.Value, 10, 64)
		if err != nil || env.ValueFrom != nil {
			t.Fatalf("%s: GOMEMLIMIT %+v, want a number of bytes", what, env)
		}
		if want := int64(math.Floor(0.9 * float64(limit.Value()))); got != want {
			t.Errorf("%s: GOMEMLIMIT %d for a limit of %s (%d bytes), want %d", what, got, limit, limit.Value(), want)
		}
	}
	containers := func(t *testing.T, r rendered) map[string]corev1.Container {
		t.Helper()
		var api, dispatcher appsv1.Deployment
		var job batchv1.Job
		r.decode(t, "Deployment/hw-hookwheel-api", &api)
		r.decode(t, "Deployment/hw-hookwheel-dispatcher", &dispatcher)
		r.decode(t, "Job/hw-hookwheel-migrate", &job)
		return map[string]corev1.Container{
			"api": api.Spec.Template.Spec.Containers[0], "dispatcher": dispatcher.Spec.Template.Spec.Containers[0],
			"migrate": job.Spec.Template.Spec.Containers[0],
		}
	}
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		cs := containers(t, renderSet(t, "minimal-values.yaml"))
		for what, c := range cs {
			check(t, what, c)
		}
		// 256Mi: the figure worked out by hand, not by the formula the check uses.
		if v := envOf(cs["api"])["GOMEMLIMIT"].Value; v != "241591910" {
			t.Errorf("API GOMEMLIMIT %s, want 241591910 (90 %% of 256Mi)", v)
		}
	})
	for _, limit := range []string{"1Gi", "1.5Gi", "512M", "300000k", "268435456", "2Ti"} {
		t.Run(limit, func(t *testing.T) {
			t.Parallel()
			set := fmt.Sprintf("dispatcher:\n  resources:\n    limits:\n      memory: %s\n", limit)
			check(t, "dispatcher", containers(t, renderValues(t, withValues(t, "minimal-values.yaml", set)))["dispatcher"])
		})
	}
	t.Run("no limit", func(t *testing.T) {
		t.Parallel()
		set := "dispatcher:\n  resources:\n    limits:\n      memory: null\n"
		c := containers(t, renderValues(t, withValues(t, "minimal-values.yaml", set)))["dispatcher"]
		if !c.Resources.Limits.Memory().IsZero() {
			t.Fatalf("memory: null left the limit %s", c.Resources.Limits.Memory())
		}
		check(t, "dispatcher", c)
	})
}

// TestDashboardIsTheRepositoryOne: the chart cannot read files outside its directory, so it carries
// a copy of deploy/grafana/hookwheel.json, the dashboard's one source; this keeps the two equal.
func TestDashboardIsTheRepositoryOne(t *testing.T) {
	t.Parallel()
	source, err := os.ReadFile("../grafana/hookwheel.json")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "hookwheel.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(source, copied) {
		t.Fatal("deploy/helm/hookwheel/dashboards/hookwheel.json differs from deploy/grafana/hookwheel.json: " +
			"cp deploy/grafana/hookwheel.json deploy/helm/hookwheel/dashboards/hookwheel.json")
	}
}

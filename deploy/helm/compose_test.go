package helm_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// loadCompose loads deploy/docker-compose.yml the way `docker compose --profile P...` does
// (compose-go: the Compose specification's schema, interpolation, path resolution, profiles), without
// a Docker engine.
func loadCompose(t *testing.T, profiles ...string) (dir string, project *types.Project) {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "docker-compose.yml")
	project, err = loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: file}},
		// The one variable the file insists on.
		Environment: types.Mapping{"HOOKWHEEL_ENCRYPTION_KEY": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},
	}, func(o *loader.Options) {
		o.SetProjectName("hookwheel", true)
		o.Profiles = profiles
	})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return dir, project
}

// TestComposeDefault: a plain `docker compose up` starts hookwheel and what it needs, and not
// Prometheus and Grafana, whose Grafana would sign in with admin/admin unless told otherwise.
func TestComposeDefault(t *testing.T) {
	t.Parallel()
	_, project := loadCompose(t)
	if got, want := slices.Sorted(maps.Keys(project.Services)), []string{"hookwheel", "postgres", "redis"}; !slices.Equal(got, want) {
		t.Errorf("docker compose up starts %v, want %v", got, want)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		svc, ok := project.DisabledServices[name]
		if !ok || !slices.Equal(svc.Profiles, []string{"monitoring"}) {
			t.Errorf("%s is not under the monitoring profile alone: %v", name, svc.Profiles)
		}
	}
}

// TestCompose checks, with the monitoring profile on, that Prometheus scrapes hookwheel's metrics
// listener and Grafana gets the data source and dashboard.
func TestCompose(t *testing.T) {
	t.Parallel()
	dir, project := loadCompose(t, "monitoring")
	for _, name := range []string{"postgres", "redis", "hookwheel", "prometheus", "grafana"} {
		if _, ok := project.Services[name]; !ok {
			t.Errorf("no %s service", name)
		}
	}
	mounts := map[string]string{} // target in a container → file on the host
	for _, svc := range project.Services {
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("service %s mounts %s, which does not exist", svc.Name, v.Source)
			}
			if !v.ReadOnly {
				t.Errorf("service %s mounts %s writable", svc.Name, v.Source)
			}
			mounts[v.Target] = v.Source
		}
		for _, p := range svc.Ports {
			if p.HostIP != "127.0.0.1" && svc.Name != "hookwheel" {
				t.Errorf("service %s publishes port %d beyond the host's loopback", svc.Name, p.Target)
			}
		}
	}

	// Prometheus scrapes the port hookwheel serves its metrics on, under the service's name.
	hw := project.Services["hookwheel"]
	metricsAddr := *hw.Environment["HOOKWHEEL_METRICS_ADDR"]
	_, metricsPort, _ := strings.Cut(metricsAddr, ":")
	if !slices.Contains(hw.Expose, metricsPort) {
		t.Errorf("hookwheel exposes %v, not its metrics port %s", hw.Expose, metricsPort)
	}
	var prom struct {
		ScrapeConfigs []struct {
			JobName      string `json:"job_name"`
			DNSSDConfigs []struct {
				Names []string
				Type  string
				Port  int
			} `json:"dns_sd_configs"`
			StaticConfigs []struct{ Targets []string } `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	readYAML(t, mounts["/etc/prometheus/prometheus.yml"], &prom)
	scraped := false
	for _, sc := range prom.ScrapeConfigs {
		for _, d := range sc.DNSSDConfigs {
			scraped = scraped || slices.Contains(d.Names, "hookwheel") && metricsPort == strconv.Itoa(d.Port)
		}
		for _, s := range sc.StaticConfigs {
			scraped = scraped || slices.Contains(s.Targets, "hookwheel"+metricsAddr)
		}
	}
	if !scraped {
		t.Errorf("prometheus.yml does not scrape hookwheel%s: %+v", metricsAddr, prom)
	}

	// Grafana: the Prometheus data source, and a dashboard provider reading the mounted dashboard.
	var ds struct {
		Datasources []struct{ Type, URL string } `json:"datasources"`
	}
	readYAML(t, filepath.Join(mounts["/etc/grafana/provisioning/datasources"], "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana data sources %+v", ds.Datasources)
	}
	var dash struct {
		Providers []struct {
			Options struct{ Path string }
		}
	}
	readYAML(t, filepath.Join(mounts["/etc/grafana/provisioning/dashboards"], "hookwheel.yml"), &dash)
	if len(dash.Providers) != 1 {
		t.Fatalf("dashboard providers %+v", dash.Providers)
	}
	mounted := mounts[dash.Providers[0].Options.Path+"/hookwheel.json"]
	if mounted != filepath.Join(dir, "grafana", "hookwheel.json") {
		t.Errorf("Grafana's dashboard folder %s holds %q, want deploy/grafana/hookwheel.json",
			dash.Providers[0].Options.Path, mounted)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

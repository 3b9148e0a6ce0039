package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s hwbench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// machine describes where a benchmark ran.
type machine struct {
	Hostname     string  `json:"hostname"`
	CPU          string  `json:"cpu"`
	Cores        int     `json:"cores"`
	MemoryGiB    float64 `json:"memory_gib"`
	Kernel       string  `json:"kernel"`
	Go           string  `json:"go"`
	Postgres     string  `json:"postgres"`
	Redis        string  `json:"redis"`
	Commit       string  `json:"hookwheel_commit"`
	LoadAvgStart string  `json:"loadavg_at_start"`
	LoadAvgEnd   string  `json:"loadavg_at_end,omitempty"`
}

func describeMachine(ctx context.Context, svc *services) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if f := strings.Fields(line); len(f) >= 2 {
					kb, _ := strconv.ParseFloat(f[1], 64)
					m.MemoryGiB = math.Round(kb/1024/1024*10) / 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvgStart = loadAvg()
	if conn, err := pgx.Connect(ctx, svc.databaseURL); err == nil {
		_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
		conn.Close(ctx)
	}
	if rdb, err := svc.redis(); err == nil {
		if info, err := rdb.Info(ctx, "server").Result(); err == nil {
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					m.Redis = v
				}
			}
		}
		rdb.Close()
	}
	if root, err := findRepoRoot(); err == nil {
		if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
			if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
				m.Commit += " (with uncommitted changes)"
			}
		}
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d cores, %.0f GiB RAM, Linux %s; %s; Postgres %s, Redis %s, on the same machine; hookwheel %s; load average %s at start",
		m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, m.Postgres, m.Redis, m.Commit, m.LoadAvgStart)
}

// envelope is what a results JSON file holds.
type envelope struct {
	Scenario string                       `json:"scenario"`
	Date     string                       `json:"date"`
	Command  string                       `json:"command"`
	Machine  machine                      `json:"machine"`
	Settings map[string]map[string]string `json:"settings"`
	Results  any                          `json:"results"`
}

type reporter struct {
	dir      string
	date     string
	command  string
	machine  machine
	settings map[string]map[string]string
	md       strings.Builder
	written  []string
}

func newReporter(dir, command string, m machine) (*reporter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &reporter{dir: dir, date: time.Now().UTC().Format("2006-01-02"), command: command, machine: m,
		settings: map[string]map[string]string{}}, nil
}

func (r *reporter) path(name string) string { return filepath.Join(r.dir, r.date+"-"+name) }

func (r *reporter) writeJSON(scenario string, results any) error {
	r.machine.LoadAvgEnd = loadAvg()
	b, err := json.MarshalIndent(envelope{Scenario: scenario, Date: r.date, Command: r.command, Machine: r.machine,
		Settings: r.settings, Results: results}, "", "  ")
	if err != nil {
		return err
	}
	p := r.path(scenario + ".json")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return err
	}
	r.written = append(r.written, p)
	return nil
}

func (r *reporter) writeMarkdown(name, title string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	fmt.Fprintf(&b, "- Date: %s (UTC)\n- Command: `%s`\n- Machine: %s\n", r.date, r.command, r.machine)
	if r.machine.LoadAvgEnd != "" {
		fmt.Fprintf(&b, "- Load average at the end: %s (other work on the machine shares its cores)\n", r.machine.LoadAvgEnd)
	}
	b.WriteString("\n")
	b.WriteString(r.md.String())
	p := r.path(name + ".md")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return err
	}
	r.written = append(r.written, p)
	return nil
}

func (r *reporter) printf(format string, args ...any) { fmt.Fprintf(&r.md, format, args...) }

func (r *reporter) settingsTable() {
	r.printf("## Settings\n\n")
	for _, name := range []string{"hookwheel", "river", "asynq"} {
		s, ok := r.settings[name]
		if !ok {
			continue
		}
		r.printf("**%s**\n\n", name)
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sortStrings(keys)
		for _, k := range keys {
			r.printf("- %s: %s\n", k, s[k])
		}
		r.printf("\n")
	}
}

func (r *reporter) latenessTable(title string, runs []*lateResult) {
	if len(runs) == 0 {
		return
	}
	r.printf("### %s\n\n", title)
	r.printf("| system | run | tasks | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | early | missing | dup | achieved /s | CPU s: harness / hookwheel / postgres / redis | CPU ms per delivery |\n")
	r.printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, x := range runs {
		early := strconv.FormatInt(x.Early, 10)
		if x.Early > 0 {
			early += fmt.Sprintf(" (up to %.0f ms)", x.EarlyMaxMs)
		}
		r.printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %d | %d | %.0f | %s |\n",
			x.System, x.Label, x.Tasks, x.Lateness.P50Ms, x.Lateness.P90Ms, x.Lateness.P99Ms, x.Lateness.P999Ms,
			x.Lateness.MaxMs, early, x.Missing, x.Duplicates, x.AchievedRate, cpuCells(x.CPU))
	}
	r.printf("\n")
}

func (r *reporter) throughputTable(runs []*lateResult) {
	if len(runs) == 0 {
		return
	}
	r.printf("### End-to-end throughput (all tasks due at one instant)\n\n")
	r.printf("| system | tasks | deliveries/s | sustained /s (min / median of whole seconds) | window s | last delivered after due, ms | recorded done in Postgres | Postgres CPU ms per task, whole life (of it, storing) | Postgres WAL bytes per task (of it, storing) | node CPU ms per task | missing | dup | CPU s while delivering: harness / hookwheel / postgres backends / redis | CPU ms per delivery |\n")
	r.printf("|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|\n")
	for _, x := range runs {
		rec := "—"
		if x.AttemptsRecorded > 0 {
			rec = fmt.Sprintf("%d (all %.0f ms after the last delivery)", x.AttemptsRecorded, x.AttemptsRecordedLagMs)
		}
		wal, pgCPU, nodeCPU := "—", "—", "—"
		if x.WALBytesPerTask > 0 {
			wal = fmt.Sprintf("%.0f", x.WALBytesPerTask)
		}
		if l := x.Life; l != nil {
			pgCPU = fmt.Sprintf("%.3f", l.PostgresCPUPerTaskMs)
			if st := l.Storing; st != nil {
				pgCPU += fmt.Sprintf(" (%.3f)", st.PostgresCPUPerTaskMs)
				if x.WALBytesPerTask > 0 {
					wal += fmt.Sprintf(" (%.0f)", st.WALBytesPerTask)
				}
			}
			if l.NodeCPUPerTaskMs > 0 {
				nodeCPU = fmt.Sprintf("%.3f", l.NodeCPUPerTaskMs)
			}
		}
		sustained := "— (window under 2 s)"
		if x.SustainedMedian > 0 {
			sustained = fmt.Sprintf("%.0f / %.0f", x.SustainedMin, x.SustainedMedian)
		}
		r.printf("| %s | %d | %.0f | %s | %.1f | %.0f | %s | %s | %s | %s | %d | %d | %s |\n",
			x.System, x.Tasks, x.AchievedRate, sustained, x.WindowS, x.Lateness.MaxMs, rec, pgCPU, wal, nodeCPU, x.Missing, x.Duplicates, cpuCells(x.CPU))
	}
	r.printf("\n")
}

// flowTable is the flow scenario's measures, each beside what a limit held
// exactly would give.
func (r *reporter) flowTable(x *flowResult) {
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	fewest := "— (run under 1 s)"
	if x.FewestInSecond >= 0 {
		fewest = fmt.Sprintf("%d (from +%.3f s)", x.FewestInSecond, x.FewestInSecondAtS)
	}
	r.printf("| measure | measured | limit held exactly |\n|---|---|---|\n")
	r.printf("| mean rate: (arrivals − 1) / (last − first arrival) | %.2f /s (%.3f of the limit) | %d /s |\n", x.MeanRate, x.MeanRateRatio, x.Rate)
	r.printf("| most arrivals in any 1 s window | %d (from +%.3f s) | %d, at most %d |\n", x.MostInSecond, x.MostInSecondAtS, x.Rate, x.Rate+1)
	r.printf("| fewest arrivals in a 1 s window between the first and the last | %s | %d |\n", fewest, x.Rate)
	r.printf("| gap between consecutive arrivals, ms: min / p1 / p50 / p99 / max | %s / %s / %s / %s / %s | %s |\n",
		ms(x.Gaps.MinMs), ms(x.Gaps.P1Ms), ms(x.Gaps.P50Ms), ms(x.Gaps.P99Ms), ms(x.Gaps.MaxMs), ms(x.IntervalMs))
	if x.Sends > 0 {
		r.printf("| most sends in any 1 s window, by when hookwheel began each (`attempts.started_at`, %d attempts) | %d (from +%.3f s) | %d, at most %d |\n", x.Sends, x.SendsMostInSecond, x.SendsMostInSecondAtS, x.Rate, x.Rate+1)
		r.printf("| gap between consecutive sends begun, ms: min / p1 / p50 / p99 / max | %s / %s / %s / %s / %s | %s |\n",
			ms(x.SendGaps.MinMs), ms(x.SendGaps.P1Ms), ms(x.SendGaps.P50Ms), ms(x.SendGaps.P99Ms), ms(x.SendGaps.MaxMs), ms(x.IntervalMs))
	}
	r.printf("| i-th arrival after its slot (first arrival + i × %s ms), ms: min / p50 / p99 / max | %s / %s / %s / %s | 0 |\n",
		ms(x.IntervalMs), ms(x.SlotLateness.MinMs), ms(x.SlotLateness.P50Ms), ms(x.SlotLateness.P99Ms), ms(x.SlotLateness.MaxMs))
	r.printf("| tasks delivered once / missing / repeats | %d / %d / %d | %d / 0 / 0 |\n", x.Delivered, x.Missing, x.Duplicates, x.Tasks)
	r.printf("| first arrival after the due instant, ms | %s | — |\n", ms(x.FirstAfterDueMs))
	r.printf("| claims deferred for their flow-rate slot (`hookwheel_deferrals_total{reason=\"flow_rate\"}`) | %.0f | — |\n", x.FlowRateDeferrals)
	if x.Run != nil {
		// cpuCells makes two cells of a row; here they share one.
		r.printf("| CPU s: harness / hookwheel / postgres / redis; ms per delivery | %s | — |\n", strings.Replace(cpuCells(x.Run.CPU), " | ", "; ", 1))
		for _, n := range x.Run.Notes {
			r.printf("\n%s\n", n)
		}
	}
	r.printf("\n")
}

func cpuCells(u *cpuUse) string {
	if u == nil {
		return "— | —"
	}
	node, pg := "—", "—"
	if u.NodeS > 0 {
		node = fmt.Sprintf("%.1f", u.NodeS)
	}
	if u.PostgresS > 0 {
		pg = fmt.Sprintf("%.1f", u.PostgresS)
	}
	return fmt.Sprintf("%.1f / %s / %s / %.1f | %.3f", u.HarnessS, node, pg, u.RedisS, u.PerDeliveryMs)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// plotSeries is one lateness distribution to draw.
type plotSeries struct {
	name  string
	hist  *hdrhistogram.Histogram
	early int64 // arrivals before their due time, drawn at the bottom of the scale
}

// plotLateness draws, side by side, the lateness percentile curves of every
// series (log scale) and a box plot of each.
func (r *reporter) plotLateness(name, title string, series []plotSeries) error {
	var kept []plotSeries
	for _, s := range series {
		if s.hist != nil && s.hist.TotalCount() > 0 {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	curves := plot.New()
	curves.Title.Text = title + ": lateness by percentile"
	curves.X.Label.Text = "percentile"
	curves.Y.Label.Text = "lateness (ms, log scale)"
	curves.Y.Scale = plot.LogScale{}
	curves.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	curves.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{
		{Value: 0, Label: "0%"}, {Value: 1, Label: "90%"}, {Value: 2, Label: "99%"}, {Value: 3, Label: "99.9%"},
		{Value: 4, Label: "99.99%"}, {Value: 5, Label: "99.999%"},
	})
	curves.Legend.Top = true
	curves.Legend.Left = true
	curves.Add(plotter.NewGrid())

	boxes := plot.New()
	boxes.Title.Text = title + ": distribution"
	boxes.Y.Label.Text = "lateness (ms, log scale)"
	boxes.Y.Scale = plot.LogScale{}
	boxes.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var names []string
	for i, s := range kept {
		var pts plotter.XYs
		for _, p := range fineQuantiles {
			if p >= 100 {
				break
			}
			pts = append(pts, plotter.XY{X: math.Log10(100 / (100 - p)), Y: math.Max(0.01, float64(s.hist.ValueAtQuantile(p))/1000)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(2)
		line.Dashes = plotutil.Dashes(i)
		curves.Add(line)
		label := fmt.Sprintf("%s (max %.1f ms)", s.name, float64(s.hist.Max())/1000)
		if s.early > 0 {
			label = fmt.Sprintf("%s (max %.1f ms; %.0f%% early, drawn at 0.01 ms)", s.name, float64(s.hist.Max())/1000,
				100*float64(s.early)/float64(s.hist.TotalCount()))
		}
		curves.Legend.Add(label, line)

		// A box plot of 1,000 evenly spaced quantiles stands for the
		// whole distribution.
		vals := make(plotter.Values, 0, 1001)
		for q := 0.05; q < 100; q += 0.1 {
			vals = append(vals, math.Max(0.01, float64(s.hist.ValueAtQuantile(q))/1000))
		}
		vals = append(vals, math.Max(0.01, float64(s.hist.Max())/1000))
		box, err := plotter.NewBoxPlot(vg.Points(30), float64(i), vals)
		if err != nil {
			return err
		}
		box.FillColor = withAlpha(plotutil.Color(i), 0x60)
		box.GlyphStyle.Radius = vg.Points(1.5)
		boxes.Add(box)
		names = append(names, s.name)
	}
	boxes.NominalX(names...)
	boxes.X.Min, boxes.X.Max = -0.5, float64(len(kept))-0.5

	const w, h = 14 * vg.Inch, 6 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	plots := [][]*plot.Plot{{curves, boxes}}
	canvases := plot.Align(plots, tiles, dc)
	curves.Draw(canvases[0][0])
	boxes.Draw(canvases[0][1])
	p := r.path(name + ".png")
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return err
	}
	r.written = append(r.written, p)
	return nil
}

// timelinePanel is one run's lateness over time, with the instants of the
// events that happened during it.
type timelinePanel struct {
	title  string
	points []timelinePoint
	marks  []timelineMark
}

type timelineMark struct {
	atS   float64
	label string
}

// plotTimeline draws, one panel above the other, each run's median and worst
// lateness of the tasks due in each slice of time (log scale), with its
// events as vertical lines.
func (r *reporter) plotTimeline(name string, panels []timelinePanel) error {
	var plots [][]*plot.Plot
	for _, pn := range panels {
		if len(pn.points) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "due time (s after the first)"
		p.Y.Label.Text = "lateness (ms, log scale)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		// Tasks on time to the microsecond would sit at -inf on a log scale.
		const floor = 0.01
		var med, worst plotter.XYs
		top := 1.0
		for _, pt := range pn.points {
			med = append(med, plotter.XY{X: pt.DueS, Y: math.Max(floor, pt.P50Ms)})
			worst = append(worst, plotter.XY{X: pt.DueS, Y: math.Max(floor, pt.MaxMs)})
			top = math.Max(top, pt.MaxMs)
		}
		for i, l := range []struct {
			name string
			xys  plotter.XYs
		}{{"worst of each 100 ms of due times", worst}, {"median", med}} {
			line, err := plotter.NewLine(l.xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(l.name, line)
		}
		p.Y.Min, p.Y.Max = floor, top*3
		for _, m := range pn.marks {
			line, err := plotter.NewLine(plotter.XYs{{X: m.atS, Y: floor}, {X: m.atS, Y: top * 3}})
			if err != nil {
				return err
			}
			line.Color = color.Gray{Y: 0x60}
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			labels, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: m.atS, Y: top * 1.5}}, Labels: []string{" " + m.label}})
			if err != nil {
				return err
			}
			p.Add(line, labels)
		}
		plots = append(plots, []*plot.Plot{p})
	}
	if len(plots) == 0 {
		return nil
	}
	w, h := 14*vg.Inch, vg.Length(len(plots))*4*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	p := r.path(name + ".png")
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return err
	}
	r.written = append(r.written, p)
	return nil
}

var fineQuantiles = func() []float64 {
	var q []float64
	for x := 0.0; x <= 5.0001; x += 0.02 {
		q = append(q, 100-100/math.Pow(10, x))
	}
	return q
}()

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: a}
}

// scrapeMetric reads one unlabelled gauge from a node's /metrics.
func scrapeMetric(base, name string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}

// scrapeSum adds up every series of one metric on a node's /metrics (each
// label set), or -1 if the node does not answer.
func scrapeSum(base, name string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// nodeMetrics sums hookwheel's own series (no histogram buckets) over its
// live nodes, keyed by series with labels.
func nodeMetrics(sys system) map[string]float64 {
	var h *hookwheelSystem
	switch s := sys.(type) {
	case *hookwheelSystem:
		h = s
	case *idKeeper:
		h = s.hookwheelSystem
	default:
		return nil
	}
	out := map[string]float64{}
	for _, n := range h.nodes {
		select {
		case <-n.exited:
			continue
		default:
		}
		resp, err := http.Get(n.base + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "hookwheel_") || strings.Contains(line, "_bucket{") || strings.HasPrefix(line, "hookwheel_http_request") {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			if i < 0 {
				continue
			}
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				continue
			}
			out[line[:i]] += v
		}
	}
	return out
}

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReportInBrowser: the report of a sweep with a retried failure, a
// failure and runs sharing the CPUs, loaded by headless Chromium with its
// scripts run: the timeline has one bar per attempt, the table one row per
// run, and the page asked for nothing over the network (its CSP forbids it,
// and Chromium's net log shows no request of the page's). Needs Debian's
// chromium, which .ci/run installs; skipped without it elsewhere.
func TestReportInBrowser(t *testing.T) {
	chromium := needChromium(t)
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", strings.Join([]string{
		"echo a",
		"test -e " + filepath.Join(dir, "once") + " || { touch " + filepath.Join(dir, "once") + "; echo 'CUDA error: out of memory' >&2; exit 1; }",
		"echo c; exit 3",
		"sleep 0.2",
		"echo '<script>alert(1)</script> & \"quotes\"'",
	}, "\n")+"\n")
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "run", "-q", "--retry", "cuda-oom=1", "--retry-backoff", "0", "-o", out, tasks); code != exitFailed {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	page := filepath.Join(dir, "elsewhere", "sweep.html")
	os.MkdirAll(filepath.Dir(page), 0o755)
	code, _, stderr := runCLI(t, "report", "-o", page, out)
	if code != exitOK || !strings.Contains(stderr, "5 runs, 6 attempts") {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	html, _ := os.ReadFile(page)
	if !strings.Contains(string(html), `content="default-src 'none';`) {
		t.Error("the page has no Content-Security-Policy forbidding loads")
	}
	netLog := filepath.Join(dir, "net.json")
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--log-net-log="+netLog, "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "file://"+page)
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	count := func(class string) int { return strings.Count(string(dom), `class="`+class+`"`) }
	if count("bar") != 6 || count("run") != 5 || count("retry-link") != 1 {
		t.Errorf("%d bars (want one per attempt, 6), %d table rows (want 5), %d retry links (want 1)", count("bar"), count("run"), count("retry-link"))
	}
	if strings.Contains(string(dom), "<script>alert(1)") {
		t.Error("a run's output reached the page as markup")
	}
	// Links to the logs reach them from where the page is.
	for _, m := range regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(string(dom), -1) {
		if _, err := os.Stat(filepath.Join(filepath.Dir(page), m[1])); err != nil {
			t.Errorf("link %s: %v", m[1], err)
		}
	}
	// Every URL in the net log is the page itself or the browser's own.
	b, err := os.ReadFile(netLog)
	if err != nil {
		t.Fatal(err)
	}
	own := []string{"google.com", "googleapis.com", "gvt1.com", "gstatic.com", "chrome://", "chrome-extension://", "data:"}
	var urls []string
	for _, m := range regexp.MustCompile(`"url":"([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		u := m[1]
		if u == "file://"+page || slices.ContainsFunc(own, func(o string) bool { return strings.Contains(u, o) }) {
			continue
		}
		urls = append(urls, u)
	}
	if len(urls) > 0 {
		t.Errorf("the page asked for %q", urls)
	}
	var doc any
	if json.Unmarshal(b, &doc) != nil && len(b) > 0 && !strings.HasSuffix(strings.TrimSpace(string(b)), "]}") {
		t.Logf("net log not closed (chromium may leave it open): %d bytes", len(b))
	}
}

// chartsFixture writes an output directory of a 72-run sweep over a
// log-scale parameter (lr), a linear one with six values (dropout) and a
// categorical one (opt, one of whose values tries markup), whose runs
// reported a per-step loss and a final acc, as nodepack run records them:
// params in the started records, metrics and a few curve points in the
// finished ones, and each run's whole curve in its metrics file. The best
// run by loss is lr=0.001, dropout=0.1, opt=adam. It returns the
// directory and how many runs it has.
func chartsFixture(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","host":"n1","pid":1,"node":{"hostname":"n1","cpus":[{"id":0},{"id":1}],"gpus":[]},"shard":{"index":0,"count":1},"total":72,"sweep":{"kind":"params","source":"p.jsonl","command":["train"],"reps":1,"shards":1}}` + "\n")
	n := 0
	start := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, lr := range []float64{1e-4, 1e-3, 1e-2, 1e-1} {
		for _, opt := range []string{"adam", "sgd", "<b>x</b>"} {
			for k := range 6 {
				dropout := float64(k) / 10
				final := 0.2 + 0.3*math.Abs(math.Log10(lr/1e-3)) + math.Abs(dropout-0.1) + map[string]float64{"adam": 0, "sgd": 0.1, "<b>x</b>": 0.2}[opt]
				id := fmt.Sprintf("%012x", n+1)
				params, _ := json.Marshal(map[string]any{"lr": lr, "dropout": dropout, "opt": opt})
				runDir := fmt.Sprintf("runs/r-%s", id)
				os.MkdirAll(filepath.Join(dir, runDir), 0o755)
				var curve strings.Builder
				var points [][2]float64
				for step := 0; step <= 1000; step += 20 {
					loss := final + 2*math.Exp(-float64(step)/200)
					fmt.Fprintf(&curve, "{\"step\": %d, \"loss\": %g}\n", step, loss)
					if step%100 == 0 {
						points = append(points, [2]float64{float64(step), loss})
					}
				}
				os.WriteFile(filepath.Join(dir, runDir, "metrics.jsonl"), []byte(curve.String()), 0o644)
				curves, _ := json.Marshal(map[string]any{"loss": points})
				s, e := start.Add(time.Duration(n)*10*time.Second), start.Add(time.Duration(n+2)*10*time.Second)
				fmt.Fprintf(&b, `{"type":"started","time":%q,"host":"n1","pid":%d,"id":%q,"index":%d,"origin":"p.jsonl:%d","attempt":1,"slot":%d,"cpus":"%d","request":"gpus=0 cpus=1","stdout":"%s/stdout.log","stderr":"%s/stderr.log","params":%s}`+"\n",
					s.Format(time.RFC3339Nano), 100+n, id, n, n+1, n%2, n%2, runDir, runDir, params)
				fmt.Fprintf(&b, `{"type":"finished","time":%q,"id":%q,"index":%d,"origin":"p.jsonl:%d","attempt":1,"slot":%d,"request":"gpus=0 cpus=1","stdout":"%s/stdout.log","stderr":"%s/stderr.log","exit_code":0,"reason":"ok","duration_s":20,"metrics":{"loss":%g,"acc":%g},"curves":%s}`+"\n",
					e.Format(time.RFC3339Nano), id, n, n+1, n%2, runDir, runDir, final, 1-final/3, curves)
				n++
			}
		}
	}
	b.WriteString(`{"type":"end","time":"2026-11-24T10:20:00Z","note":"done"}` + "\n")
	writeFile(t, dir, "ledger.jsonl", b.String())
	return dir, n
}

// TestReportCharts: the page of a sweep with a log-scale, a linear and a
// categorical parameter, loaded by headless Chromium: the best runs are
// ranked by the loss (its choice said on the page), with their learning
// curves; a chart per parameter with the right kind of axis and a point
// per run; parallel coordinates with a line per run; the table sorts and
// filters as its address says (#sort=…&filter=…), and another metric and
// direction rank the runs (#metric=acc:max); no run's text became markup.
func TestReportCharts(t *testing.T) {
	chromium := needChromium(t)
	dir, n := chartsFixture(t)
	if code, _, stderr := runCLI(t, "report", dir); code != exitOK {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	page := filepath.Join(dir, "report.html")
	load := func(hash string) string {
		t.Helper()
		out, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
			"--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "file://"+page+hash).Output()
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		if !strings.Contains(string(out), `data-ready="1"`) {
			t.Fatalf("the page's script did not finish:\n%.2000s", out)
		}
		return string(out)
	}
	dom := load("")
	attr := func(dom, id, name string) string {
		m := regexp.MustCompile(`<canvas[^>]*` + id + `[^>]*>`).FindString(dom)
		v := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(m)
		if v == nil {
			return ""
		}
		return v[1]
	}
	if !strings.Contains(dom, "the loss the runs report") {
		t.Error("the page does not say why it ranks by loss")
	}
	bestRows := regexp.MustCompile(`(?s)<tr class="best-run">(.*?)</tr>`).FindAllStringSubmatch(dom, -1)
	if len(bestRows) != 10 || !strings.Contains(bestRows[0][1], "<td>p.jsonl:") || !strings.Contains(bestRows[0][1], ">0.001<") || !strings.Contains(bestRows[0][1], ">adam<") {
		t.Errorf("best runs %d, the first %q: want 10, led by lr 0.001 with adam", len(bestRows), bestRows)
	}
	if got := attr(dom, `id="curves"`, "data-curves"); got != "10" {
		t.Errorf("%s learning curves drawn, want the best 10", got)
	}
	for _, tc := range []struct{ param, axis string }{{"lr", "log"}, {"dropout", "linear"}, {"opt", "category"}} {
		if got, pts := attr(dom, `data-param="`+tc.param+`"`, "data-axis"), attr(dom, `data-param="`+tc.param+`"`, "data-points"); got != tc.axis || pts != strconv.Itoa(n) {
			t.Errorf("the chart of %s: axis %q with %s points, want %s with %d", tc.param, got, pts, tc.axis, n)
		}
	}
	if lines, axes := attr(dom, `id="pc"`, "data-lines"), attr(dom, `id="pc"`, "data-axes"); lines != strconv.Itoa(n) || axes != "4" {
		t.Errorf("parallel coordinates: %s lines on %s axes, want %d on 4", lines, axes, n)
	}
	if strings.Contains(dom, "<b>x</b>") {
		t.Error("a parameter's value reached the page as markup")
	}
	// Sorted and filtered as the address says: sgd runs by loss, highest first.
	dom = load("#sort=loss:desc&filter=sgd")
	rows := regexp.MustCompile(`<tr class="run" data-row="(\d+)">`).FindAllStringSubmatch(dom, -1)
	if len(rows) != n/3 || !strings.Contains(dom, fmt.Sprintf("%d runs", n/3)) {
		t.Fatalf("%d rows shown with filter=sgd, want %d", len(rows), n/3)
	}
	first, _ := strconv.Atoi(rows[0][1])
	if first%18 < 6 || first%18 >= 12 || first/18 != 3 {
		t.Errorf("the first row by loss, highest first, among sgd runs is row %d: want one of lr 0.1 with sgd", first)
	}
	// Ranked by another metric, the other way.
	dom = load("#metric=acc:max")
	if best := regexp.MustCompile(`(?s)<tr class="best-run">(.*?)</tr>`).FindStringSubmatch(dom); best == nil || !strings.Contains(best[1], ">0.001<") {
		t.Errorf("ranked by acc, highest first: %q", best)
	}
}

// TestReportShowsRunsWithTheSameCurve: the README's results sweep has two
// runs whose curves are the same (their loss depends on the learning rate
// alone); drawn as one line, one of them would be in the key and nowhere
// on the chart. The second is drawn dashed over the first, and the key
// says so.
func TestReportShowsRunsWithTheSameCurve(t *testing.T) {
	chromium := needChromium(t)
	out := filepath.Join(t.TempDir(), "results")
	if code, _, stderr := runCLI(t, "run", "-q", "-o", out, "--params", "../../examples/sweeps/runs.jsonl", "--", "python3", "../../examples/sweeps/report_metrics.py"); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "report", out); code != exitOK {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	dom := reportDOM(t, chromium, out)
	canvas := regexp.MustCompile(`<canvas[^>]*id="curves"[^>]*>`).FindString(dom)
	if !strings.Contains(canvas, `data-curves="3"`) || !strings.Contains(canvas, `data-shared="1"`) {
		t.Errorf("the curves chart %s: want 3 curves, one of them drawn over another's", canvas)
	}
	if !strings.Contains(dom, "(dashed: the same curve as #") {
		t.Error("the key does not say which run shares a curve")
	}
}

// reportDOM is the DOM headless chromium makes of out's report.html once
// its script ran.
func reportDOM(t *testing.T, chromium, out string) string {
	t.Helper()
	dom, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "file://"+filepath.Join(out, "report.html")).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(dom)
}

// needChromium returns the path of chromium, and skips the test where it
// is not installed (fails it when NODEPACK_CI is set: CI installs it).
func needChromium(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("NODEPACK_CI") != "" {
			t.Fatal("chromium is not installed, and CI needs this test")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	return chromium
}

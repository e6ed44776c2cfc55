package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReportInBrowser: the report of a sweep with a retried failure, a
// failure and runs sharing the CPUs, loaded by headless Chromium with its
// scripts run: the timeline has one bar per attempt, the table one row per
// run, and the page asked for nothing over the network (its CSP forbids it,
// and Chromium's net log shows no request of the page's). Needs Debian's
// chromium, which .ci/run installs; skipped without it elsewhere.
func TestReportInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("NODEPACK_CI") != "" {
			t.Fatal("chromium is not installed, and CI needs this test")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
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

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/cmd/internal/flagvalue"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/schedule"
)

// pruneSweep writes a params sweep of runs that report their loss at
// steps 1 to 8 (level + 1/step), one line each to $NODEPACK_METRICS; a
// run named gate stops after step 3 until the file go exists in dir,
// having made the file waiting; a run named slow is a slow starter that
// keeps checkpoints: loss 1 up to step 2 and 0.05 after, its step saved
// in $NODEPACK_CHECKPOINT_DIR at every step and resumed from. Each run
// appends "started from STEP" to dir/NAME.starts. It returns the params
// file and the training script.
func pruneSweep(t *testing.T, dir string, levels map[string]float64, order []string) (params, script string) {
	t.Helper()
	var lines []string
	for _, name := range order {
		b, _ := json.Marshal(map[string]any{"name": name, "level": levels[name]})
		lines = append(lines, string(b))
	}
	params = writeFile(t, dir, "p.jsonl", strings.Join(lines, "\n")+"\n")
	script = writeFile(t, dir, "train.sh", `for a in "$@"; do declare "${a#--}"; done
ck="$NODEPACK_CHECKPOINT_DIR"; from=0
if [ "$name" = slow ] && [ -f "$ck/step" ]; then from=$(cat "$ck/step"); fi
echo "started from $from" >> `+dir+`/$name.starts
for step in 1 2 3 4 5 6 7 8; do
	[ $step -le $from ] && continue
	if [ "$name" = slow ]; then
		loss=1; [ $step -gt 2 ] && loss=0.05
		echo "{\"step\": $step, \"loss\": $loss}" >> "$NODEPACK_METRICS"
		echo $step > "$ck/step"; echo "{\"step\": $step, \"checkpoint\": $step}" >> "$NODEPACK_METRICS"
	else
		awk -v s="$step" -v l="$level" 'BEGIN { printf "{\"step\": %d, \"loss\": %.4f}\n", s, l + 1 / s }' >> "$NODEPACK_METRICS"
	fi
	if [ "$name" = gate ] && [ "$step" = 3 ]; then
		touch `+dir+`/waiting
		while [ ! -e `+dir+`/go ]; do sleep 0.02; done
	fi
	sleep 0.06
done
`)
	return params, script
}

// states reads the runs' states and rung records from the ledger in out.
func pruneLedger(t *testing.T, out string) (states map[string]ledger.State, rungs map[string][]int) {
	t.Helper()
	log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // id → name
	states = map[string]ledger.State{}
	log.LastAll(func(i int, st *ledger.Started, _ *ledger.Finished) error {
		r := log.At(i)
		var p struct{ Name string }
		json.Unmarshal(st.Params, &p)
		names[r.ID] = p.Name
		states[p.Name] = r.State
		return nil
	})
	rungs = map[string][]int{}
	for _, j := range log.Judgements() {
		rungs[names[j.Run]] = append(rungs[names[j.Run]], j.Rung)
	}
	return states, rungs
}

// sixRuns is the command line of a sweep of six runs a to f of known
// losses (pruneSweep: level + 1/step, levels 0.5, 0.9, 0.4, 0.95, 0.3 and
// 0.8), one at a time, under --prune spec, and its output folder.
func sixRuns(t *testing.T, spec string) (out string, args []string) {
	dir := t.TempDir()
	levels := map[string]float64{"a": 0.5, "b": 0.9, "c": 0.4, "d": 0.95, "e": 0.3, "f": 0.8}
	params, script := pruneSweep(t, dir, levels, []string{"a", "b", "c", "d", "e", "f"})
	out = filepath.Join(dir, "out")
	return out, []string{"run", "-q", "--gpus", "none", "-j", "1", "--prune", spec, "-o", out, "--params", params, "--", "bash", script}
}

// TestPruneForecastIsTheDefault: --prune with max and no first judges by
// the forecast rule: the rank rule at max/8 (here 1) and ×3, forecast
// rungs between them, and the last step, where each run that got there is
// recorded as finished (never stopped there); bad runs are pruned; a
// rerun runs nothing.
func TestPruneForecastIsTheDefault(t *testing.T) {
	out, args := sixRuns(t, "loss:min,max=8,every=20ms")
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, " pruned, 0 failed") || strings.Contains(stderr, " 0 pruned") {
		t.Fatalf("exit %d, want 0 with runs pruned:\n%s", code, stderr)
	}
	states, _ := pruneLedger(t, out)
	log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	steps, last := map[float64]bool{}, map[string]bool{}
	for _, j := range log.Judgements() {
		steps[j.Step] = true
		if j.Step == 8 {
			last[j.Run] = true
			if j.Stop {
				t.Errorf("%s was stopped at its last step: %+v", j.Run, j)
			}
		}
	}
	for s := range steps {
		if !slices.Contains([]float64{1, 2, 3, 4, 6, 8}, s) {
			t.Errorf("a judgement at step %v: the forecast rule's rungs are 1 2 3 4 6 8", s)
		}
	}
	if !steps[2] || !steps[8] {
		t.Errorf("judged at steps %v: want the forecast rung 2 and the last step 8 among them", steps)
	}
	succeeded := 0
	for _, st := range states {
		if st == "succeeded" {
			succeeded++
		}
	}
	if len(last) != succeeded || states["e"] != "succeeded" {
		t.Errorf("%d runs judged at the last step, %d succeeded (%v): want each that succeeded, the best (e) among them", len(last), succeeded, states)
	}
	if code, _, stderr := runCLI(t, args...); code != exitOK || !strings.Contains(stderr, "nothing left to run: skipped 6 runs done before") {
		t.Errorf("rerun: exit %d\n%s", code, stderr)
	}
}

// TestPruneStopsBadRuns: one run at a time, so that the judgements come
// in a known order, six runs of known losses are judged at the rungs 2
// and 6 (first=2, eta 3, max 8): a run outside the best third of those
// that reached the rung before is stopped and pruned, the others run to
// their last step; the sweep exits 0; status and the results table say
// pruned; a rerun runs nothing.
func TestPruneStopsBadRuns(t *testing.T) {
	out, args := sixRuns(t, "loss:min,first=2,max=8,every=20ms")
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "6 runs: 3 succeeded, 3 pruned, 0 failed") {
		t.Fatalf("exit %d, want 0 with 3 pruned:\n%s", code, stderr)
	}
	states, rungs := pruneLedger(t, out)
	// a: the first at both rungs. b: 1.4 against a's 1.0 at step 2. c:
	// 0.9 within the best third of 1.0 and 1.4. d: 1.45 outside it of 0.9,
	// 1.0 and 1.4. e: best everywhere. f: 1.3, outside.
	want := map[string]ledger.State{"a": "succeeded", "b": "pruned", "c": "succeeded", "d": "pruned", "e": "succeeded", "f": "pruned"}
	wantRungs := map[string]string{"a": "[0 1]", "b": "[0]", "c": "[0 1]", "d": "[0]", "e": "[0 1]", "f": "[0]"}
	for name, st := range want {
		if states[name] != st || fmtInts(rungs[name]) != wantRungs[name] {
			t.Errorf("run %s: %s, judged at rungs %v; want %s at %s", name, states[name], rungs[name], st, wantRungs[name])
		}
	}
	// A pruned run is never resumed: its steps are spent, not "lost to
	// stops" (none of these runs keeps checkpoints).
	if code, stdout, _ := runCLI(t, "status", out); code != exitOK || !strings.Contains(stdout, "3 succeeded, 3 pruned, 0 failed") || strings.Contains(stdout, "lost to stops") {
		t.Errorf("status: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCLI(t, "status", "--runs", out); code != exitOK || strings.Count(stdout, ",pruned,") != 3 {
		t.Errorf("status --runs: exit %d\n%s", code, stdout)
	}
	// Ranked by loss, the pruned runs' loss is the one they were stopped
	// at: said, as a ranking of unlike values must be.
	for _, format := range []string{"csv", "table"} {
		code, stdout, stderr := runCLI(t, "status", "--runs", "--sort", "loss", "--format", format, out)
		if said := stdout + stderr; code != exitOK || !strings.Contains(said, "3 pruned runs ranked by their loss when they were stopped, at their last rung") {
			t.Errorf("status --runs --sort loss --format %s: exit %d, no word on the pruned runs' loss:\n%s", format, code, said)
		}
	}
	code, _, stderr = runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "nothing left to run: skipped 6 runs done before: 3 succeeded, 3 pruned") {
		t.Errorf("rerun: exit %d\n%s", code, stderr)
	}
	// The report's chart of the runs by rung: 9 judgements, 3 of them
	// stops; drawn, where a browser is here.
	if code, _, stderr := runCLI(t, "report", out); code != exitOK {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	page, _ := os.ReadFile(filepath.Join(out, "report.html"))
	_, data, _ := strings.Cut(string(page), `<script type="application/json" id="data">`)
	data, _, _ = strings.Cut(data, "</script>")
	var doc struct {
		Rungs      [][4]any
		RungMetric string
	}
	if err := json.Unmarshal([]byte(data), &doc); err != nil || len(doc.Rungs) != 9 || doc.RungMetric != "loss" {
		t.Errorf("the report's judgements: %v, %d, %q; want 9 by loss", err, len(doc.Rungs), doc.RungMetric)
	}
	stops := 0
	for _, r := range doc.Rungs {
		if r[3] == true {
			stops++
		}
	}
	if stops != 3 {
		t.Errorf("the report has %d stops among its judgements, want 3", stops)
	}
	if chromium, err := exec.LookPath("chromium"); err == nil {
		dom, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
			"--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "file://"+filepath.Join(out, "report.html")).Output()
		if err != nil || !strings.Contains(string(dom), `data-judged="9"`) || !strings.Contains(string(dom), `data-pruned="3"`) {
			t.Errorf("the chart of runs by rung is not drawn with 9 judgements, 3 pruned (%v)", err)
		}
	}
}

func fmtInts(v []int) string {
	b, _ := json.Marshal(v)
	return strings.ReplaceAll(string(b), ",", " ")
}

// TestPruneKill9: nodepack is killed with SIGKILL while a run it judged at
// the first rung still runs; the rerun replays the rung records: the runs
// it judged keep their fate (a pruned run is not run again), the run it
// killed runs again and is judged at the rungs it was not judged at, none
// twice at a rung, and the policy decides as it would have in one piece.
func TestPruneKill9(t *testing.T) {
	dir := t.TempDir()
	levels := map[string]float64{"a": 0.5, "b": 0.9, "gate": 0.2, "d": 0.95}
	params, script := pruneSweep(t, dir, levels, []string{"a", "b", "gate", "d"})
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--gpus", "none", "-j", "1", "--prune", "loss:min,first=2,max=8,every=20ms", "-o", out, "--params", params, "--", "bash", script}
	cmd := nodepackCommand(t, nil, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "waiting")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the gate run never reached step 3")
		}
	}
	// Its step 3 is judged (rung 0, step 2) within a poll or two.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, rungs := pruneLedger(t, out); len(rungs["gate"]) > 0 || time.Now().After(deadline) {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	states, rungs := pruneLedger(t, out)
	if states["a"] != "succeeded" || states["b"] != "pruned" || fmtInts(rungs["gate"]) != "[0]" {
		t.Fatalf("before the kill: %v, rungs %v", states, rungs)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	code, _, stderr := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("rerun: exit %d\n%s", code, stderr)
	}
	states, rungs = pruneLedger(t, out)
	// gate (best) ran again and was judged at rung 1 only; d, 1.45 at
	// step 2 against 0.7, 1.0 and 1.4, is pruned as it would have been.
	want := map[string]ledger.State{"a": "succeeded", "b": "pruned", "gate": "succeeded", "d": "pruned"}
	wantRungs := map[string]string{"a": "[0 1]", "b": "[0]", "gate": "[0 1]", "d": "[0]"}
	for name, st := range want {
		if states[name] != st || fmtInts(rungs[name]) != wantRungs[name] {
			t.Errorf("run %s: %s, judged at rungs %v; want %s at %s", name, states[name], rungs[name], st, wantRungs[name])
		}
	}
	if !strings.Contains(stderr, "skipped 2 runs done before: 1 succeeded, 1 pruned") {
		t.Errorf("rerun:\n%s", stderr)
	}
}

// TestPruneMisspeltMetricSaid: runs that report loss under --prune los
// are never pruned, and the sweep says why, once.
func TestPruneMisspeltMetricSaid(t *testing.T) {
	dir := t.TempDir()
	params, script := pruneSweep(t, dir, map[string]float64{"a": 0.5, "b": 0.9}, []string{"a", "b"})
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-j", "1", "--prune", "los:min,first=2,max=8,every=20ms", "-o", out, "--params", params, "--", "bash", script)
	if code != exitOK || strings.Count(stderr, "pruning judges runs by los, which no run has reported") != 1 || !strings.Contains(stderr, "(they report loss)") || !strings.Contains(stderr, "2 runs: 2 succeeded, 0 failed") {
		t.Errorf("exit %d, want 0, nothing pruned and one note naming loss:\n%s", code, stderr)
	}
}

// TestPruneBadSpec: a --prune the policy cannot use exits 2 with one line
// that names the flag and the problem, before any run starts.
func TestPruneBadSpec(t *testing.T) {
	tests := []struct {
		description string
		spec        string
		want        string
	}{
		{"no metric", ":min", "want METRIC[:min|max]"},
		{"a direction that is none", "loss:down", `want loss:min or loss:max`},
		{"eta below 2", "loss,eta=1", "eta=1: want at least 2"},
		{"eta not a number", "loss,eta=three", "eta=three"},
		{"a last step at the first rung", "loss,first=10,max=10", "last step 10"},
		{"a last step that is no number", "loss,max=nan", "last step NaN"},
		{"an infinite last step", "loss,max=inf", "last step +Inf"},
		{"an infinite first rung", "loss,first=inf", "first rung at step +Inf"},
		{"an unknown key", "loss,rungs=3", `unknown key "rungs"`},
		{"a rule that is none", "loss,rule=hyperband", "want forecast, asha, median or curve"},
		{"an interval of zero", "loss,every=0s", "want a duration above 0"},
		{"eta 0 is no default", "loss,eta=0", "eta=0: want at least 2"},
		{"first 0 is no default", "loss,first=0", "first=0: want a step above 0"},
		{"a key given twice", "loss,eta=2,eta=4", "eta given twice"},
		{"an empty item", "loss,,eta=2", "an empty item between commas"},
		{"a trailing comma", "loss,eta=2,", "an empty item between commas"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			tasks := writeFile(t, dir, "tasks.txt", "touch "+ran+"\n")
			code, _, stderr := runCLI(t, "run", "-q", "--prune", tc.spec, "-o", filepath.Join(dir, "out"), tasks)
			if code != exitUsage || !strings.Contains(stderr, "--prune") || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("--prune %s: exit %d, %q; want exit 2, one line naming --prune and saying %q", tc.spec, code, stderr, tc.want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Errorf("--prune %s: the run ran", tc.spec)
			}
		})
	}
}

// FuzzPruneFlag: any --prune either is refused with an error or gives a
// policy with rungs that judges any report without panicking.
func FuzzPruneFlag(f *testing.F) {
	for _, s := range []string{"loss:min,first=100,max=2700", "acc:max,eta=2,rule=median,every=2s", "loss,max=nan", "loss,first=1e300,eta=1000000", ":", "loss,,"} {
		f.Add(s, 3.0, 0.5)
	}
	f.Fuzz(func(t *testing.T, spec string, step, value float64) {
		var p *schedule.Prune
		var every time.Duration
		if err := flagvalue.Prune(&p, &every).Set(spec); err != nil {
			return
		}
		pr, err := schedule.NewPruner(*p)
		if err != nil {
			t.Fatalf("--prune %q was taken, and NewPruner refuses it: %v", spec, err)
		}
		if len(pr.Rungs()) == 0 {
			t.Fatalf("--prune %q was taken and has no rung", spec)
		}
		pr.Judge("a", step, value, nil)
		pr.Judge("b", step, value, nil)
	})
}

// TestPruneCountsRunsThatEndBetweenReads: runs that end before the
// pruner's first read (every=1s, runs of a few milliseconds) are read when
// they end: their values join the rungs they reached, they are not pruned
// (they ended) and no note says the metric may be misspelt; a slow run
// after them, worse at the first rung, is judged against them and pruned.
// The report's chart of the runs by rung has its steps in order (1, 3, 9,
// 27; not as text, 1, 27, 3, 9).
func TestPruneCountsRunsThatEndBetweenReads(t *testing.T) {
	dir := t.TempDir()
	params := writeFile(t, dir, "p.jsonl", `{"level": 0.5, "pause": 0}
{"level": 0.4, "pause": 0}
{"level": 0.3, "pause": 0}
{"level": 0.9, "pause": 0.5}
`)
	script := writeFile(t, dir, "train.sh", `for a in "$@"; do declare "${a#--}"; done
for step in $(seq 30); do
	echo "{\"step\": $step, \"loss\": $(awk -v s="$step" -v l="$level" 'BEGIN { print l + 1 / s }')}" >> "$NODEPACK_METRICS"
	[ "$pause" = 0 ] || sleep "$pause"
done
`)
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-j", "1", "--prune", "loss:min,first=1,max=30,every=1s", "-o", out, "--params", params, "--", "bash", script)
	if code != exitOK || !strings.Contains(stderr, "4 runs: 3 succeeded, 1 pruned, 0 failed") || strings.Contains(stderr, "misspelt") {
		t.Fatalf("exit %d, want 0, 3 succeeded and the slow bad run pruned, no note of a misspelt name:\n%s", code, stderr)
	}
	for line := range strings.Lines(stderr) {
		if strings.Contains(line, "] pruned ") && (strings.Contains(line, " log ") || !strings.HasSuffix(strings.TrimSpace(line), "p.jsonl:4")) {
			t.Errorf("a pruned run's line ends with a log, as a failure's does, or not with its origin: %q", line)
		}
	}
	log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The three fast runs at rungs 1, 3, 9 and 27, the slow one stopped at
	// the first.
	judged, stops := 0, 0
	for _, j := range log.Judgements() {
		judged++
		if j.Stop {
			stops++
		}
	}
	if judged != 13 || stops != 1 {
		t.Errorf("%d judgements, %d stops; want the fast runs' 12 and the slow run's stop", judged, stops)
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("NODEPACK_CI") != "" {
			t.Fatal("chromium is not installed, and CI needs this test")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	if code, _, stderr := runCLI(t, "report", out); code != exitOK {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	dom, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "file://"+filepath.Join(out, "report.html")).Output()
	if err != nil || !strings.Contains(string(dom), `data-steps="step 1,step 3,step 9,step 27"`) || !strings.Contains(string(dom), `data-pruned="1"`) {
		t.Errorf("the chart of runs by rung is not drawn with its steps in order and 1 pruned (%v)", err)
	}
}

// TestPrunedStaysPrunedAcrossKill9: a run judged out that takes its time
// to stop (it traps SIGTERM, within --grace) when nodepack is killed with
// SIGKILL: its judgement, in the ledger, is final: status says pruned, and
// the rerun does not run it again from its first step.
func TestPrunedStaysPrunedAcrossKill9(t *testing.T) {
	dir := t.TempDir()
	params := writeFile(t, dir, "p.jsonl", "{\"name\": \"good\", \"level\": 0.1}\n{\"name\": \"bad\", \"level\": 0.9}\n")
	script := writeFile(t, dir, "train.sh", `for a in "$@"; do declare "${a#--}"; done
echo started >> `+dir+`/$name.starts
trap 'touch `+dir+`/$name.stopping; sleep 60' TERM
for step in 1 2 3 4; do
	echo "{\"step\": $step, \"loss\": $level}" >> "$NODEPACK_METRICS"
	[ $name = good ] || sleep 0.2
done
`)
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--gpus", "none", "-j", "1", "--grace", "60s", "--prune", "loss:min,first=1,max=8,every=20ms", "-o", out, "--params", params, "--", "bash", script}
	killWhen(t, args, filepath.Join(dir, "bad.stopping"), "the bad run was never stopped") // while bad shuts down, in its grace
	if st := statusDocOf(t, out); st.Counts.Pruned != 1 || st.Counts.Succeeded != 1 || st.Counts.Interrupted != 0 {
		t.Errorf("status after the kill: %+v, want 1 succeeded, 1 pruned", st.Counts)
	}
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "skipped 2 runs done before: 1 succeeded, 1 pruned") {
		t.Errorf("rerun: exit %d, want both runs skipped:\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "bad.starts")); strings.Count(string(b), "started") != 1 {
		t.Errorf("the pruned run started %d times, want once", strings.Count(string(b), "started"))
	}
}

// TestPausedAcrossKill9: a run judged out that keeps checkpoints is
// paused, and stays paused across a kill -9 of nodepack; the rerun runs
// the run that was killed again and, once the runs after it make the
// paused run one of its rung's best, promotes it: it resumes from its
// checkpoint (a slow starter: it wins), judged at its next rung only;
// a third run starts nothing.
func TestPausedAcrossKill9(t *testing.T) {
	dir := t.TempDir()
	levels := map[string]float64{"good": 0.1, "gate": 0.05, "bad1": 2, "bad2": 2, "bad3": 2, "bad4": 2, "bad5": 2}
	params, script := pruneSweep(t, dir, levels, []string{"good", "slow", "gate", "bad1", "bad2", "bad3", "bad4", "bad5"})
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--gpus", "none", "-j", "1", "--prune", "loss:min,first=2,max=8,every=20ms", "-o", out, "--params", params, "--", "bash", script}
	killWhen(t, args, filepath.Join(dir, "waiting"), "the gate run never reached step 3") // it waits on, orphaned, for the file go
	states, rungs := pruneLedger(t, out)
	if states["good"] != "succeeded" || states["slow"] != ledger.StatePaused || fmtInts(rungs["slow"]) != "[0]" {
		t.Fatalf("before the kill: %v, rungs %v; want slow paused at rung 0", states, rungs)
	}
	if st := statusDocOf(t, out); st.Counts.Paused != 1 {
		t.Errorf("status after the kill: %+v, want 1 paused", st.Counts)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "1 paused (promoted when they may still win)") {
		t.Fatalf("rerun: exit %d, want 0 and the paused run said:\n%s", code, stderr)
	}
	states, rungs = pruneLedger(t, out)
	want := map[string]ledger.State{"good": "succeeded", "slow": "succeeded", "gate": "succeeded", "bad1": "pruned", "bad5": "pruned"}
	for name, st := range want {
		if states[name] != st {
			t.Errorf("run %s: %s, want %s", name, states[name], st)
		}
	}
	if fmtInts(rungs["slow"]) != "[0 1]" {
		t.Errorf("slow judged at rungs %v: want once at each, 0 then 1", rungs["slow"])
	}
	b, _ := os.ReadFile(filepath.Join(dir, "slow.starts"))
	if got := strings.TrimSpace(string(b)); !regexp.MustCompile(`^started from 0\nstarted from [2-8]$`).MatchString(got) {
		t.Errorf("slow's starts:\n%s\nwant two: from scratch, then from its checkpoint", got)
	}
	ledgerText, _ := os.ReadFile(filepath.Join(out, ledger.FileName(0, 1)))
	if n := strings.Count(string(ledgerText), `"promoted":true`); n != 1 {
		t.Errorf("%d started records say promoted, want 1", n)
	}
	code, _, stderr = runCLI(t, args...)
	if b2, _ := os.ReadFile(filepath.Join(dir, "slow.starts")); code != exitOK || string(b2) != string(b) {
		t.Errorf("a third run: exit %d, slow's starts\n%s\nwant none more:\n%s", code, b2, stderr)
	}
}

// killWhen starts nodepack with args and kills it with SIGKILL once file
// exists; it fails the test with why if that takes a minute.
func killWhen(t *testing.T, args []string, file, why string) {
	t.Helper()
	cmd := nodepackCommand(t, nil, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(time.Minute, func() bool { _, err := os.Stat(file); return err == nil }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(why)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// TestPausedSummaryAddsUp: a run paused before a kill -9 that the rerun
// does not promote (it cannot win) is one of the rerun's runs: the
// summary's parts add up to its total, and status's too.
func TestPausedSummaryAddsUp(t *testing.T) {
	dir := t.TempDir()
	params := writeFile(t, dir, "p.jsonl", `{"name": "good", "level": 0.1}`+"\n"+`{"name": "bad", "level": 2}`+"\n"+`{"name": "gate", "level": 0.05}`+"\n")
	script := writeFile(t, dir, "train.sh", `for a in "$@"; do declare "${a#--}"; done
ck="$NODEPACK_CHECKPOINT_DIR"; from=0
[ -f "$ck/step" ] && from=$(cat "$ck/step")
for step in 1 2 3 4 5 6; do
	[ $step -le $from ] && continue
	awk -v s="$step" -v l="$level" 'BEGIN { printf "{\"step\": %d, \"loss\": %.4f}\n", s, l + 1 / s }' >> "$NODEPACK_METRICS"
	echo $step > "$ck/step"; echo "{\"step\": $step, \"checkpoint\": $step}" >> "$NODEPACK_METRICS"
	if [ "$name" = gate ] && [ "$step" = 3 ] && [ ! -e `+dir+`/go ]; then
		touch `+dir+`/waiting
		while [ ! -e `+dir+`/go ]; do sleep 0.02; done
	fi
	sleep 0.06
done
# bad waits to be judged out (a run that ended between two reads would
# not be), however slow the machine.
if [ "$name" = bad ]; then sleep 60; fi
`)
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--gpus", "none", "-j", "1", "--prune", "loss:min,first=2,max=6,every=20ms", "-o", out, "--params", params, "--", "bash", script}
	killWhen(t, args, filepath.Join(dir, "waiting"), "the gate run never reached step 3")
	if states, _ := pruneLedger(t, out); states["good"] != "succeeded" || states["bad"] != ledger.StatePaused {
		t.Fatalf("before the kill: %v; want good succeeded, bad paused", states)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "nodepack: 2 runs: 1 succeeded, 1 paused (0 promotions), 0 failed") {
		t.Errorf("rerun: exit %d; want its summary to count the run still paused among its runs:\n%s", code, stderr)
	}
	if code, stdout, _ := runCLI(t, "status", out); code != exitOK || !strings.Contains(stdout, ": 3 runs: 2 succeeded, 1 paused, 0 failed") {
		t.Errorf("status: exit %d\n%s", code, stdout)
	}
}

// TestSummarySaysForecastCoverage: the end of a sweep under the forecast
// rule says how its forecasts held; without forecasts, nothing.
func TestSummarySaysForecastCoverage(t *testing.T) {
	var b strings.Builder
	printSummary(&b, execute.Summary{Runs: 30, Succeeded: 30, Forecasts: schedule.Coverage{Forecasts: 11, Held: 10}}, "out", false)
	if !strings.Contains(b.String(), "--prune's forecasts held for 10 of the 11 finished runs forecast while they ran") {
		t.Errorf("summary:\n%s", b.String())
	}
	b.Reset()
	printSummary(&b, execute.Summary{Runs: 30, Succeeded: 30}, "out", false)
	if strings.Contains(b.String(), "forecasts") {
		t.Errorf("a summary without forecasts speaks of them:\n%s", b.String())
	}
}

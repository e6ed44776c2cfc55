package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// TestMain lets the test binary act as the runner's supervisor, as a
// program's main does by calling proc.MaybeGuard first.
func TestMain(m *testing.M) {
	proc.MaybeGuard()
	if os.Getenv("NODEPACK_TEST_SEARCHER") == "1" {
		os.Exit(answerAsks(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

func TestDefaultOutput(t *testing.T) {
	tasks := sweep.Definition{Kind: sweep.KindTasks, Source: "tasks.txt"}
	hydra := sweep.Definition{Kind: sweep.KindSweep, Command: []string{"python", "train.py", "model={sweep}"}}
	grid := sweep.Definition{Kind: sweep.KindGrid, Source: "params.yml", Command: []string{"python", "train.py"}}
	withEnv := tasks
	withEnv.Env = []string{"X=second"}
	moreReps := tasks
	moreReps.Reps = 3
	none := batch.Job{Kind: batch.None}
	dirs := map[string]string{}
	for name, def := range map[string]sweep.Definition{"tasks": tasks, "hydra": hydra, "grid": grid, "env": withEnv} {
		d := defaultOutput(none, def, false)
		if other, ok := dirs[d]; ok {
			t.Errorf("%s and %s share %s", name, other, d)
		}
		dirs[d] = name
	}
	tests := []struct {
		description string
		job         batch.Job
		def         sweep.Definition
		want        string
	}{
		{"a task file", none, tasks, "nodepack-tasks-" + tasks.Key()},
		{"more reps: the same directory, so the sweep resumes", none, moreReps, "nodepack-tasks-" + tasks.Key()},
		{"a --sweep of train.py is named after the script", none, hydra, "nodepack-train-" + hydra.Key()},
		{"in a Slurm job", batch.Job{Kind: batch.Slurm, JobID: "42"}, tasks, "nodepack-42-tasks-" + tasks.Key()},
	}
	for _, tc := range tests {
		if got := defaultOutput(tc.job, tc.def, false); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.description, got, tc.want)
		}
	}
}

// oneSlot is a plan of one slot with no placement.
var oneSlot = pack.Plan{Slots: []pack.Slot{{Index: 0}}}

func TestPrepareRefuses(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.txt")
	os.WriteFile(tasks, []byte("true\n"), 0o644)
	grid := filepath.Join(dir, "grid.yml")
	os.WriteFile(grid, []byte("a: [1, 2]\n"), 0o644)
	big := filepath.Join(dir, "big.txt")
	os.WriteFile(big, []byte("true\n#nodepack cpus=4\ntrue 2\n"), 0o644)
	twoCPUs := pack.Topology{CPUs: []pack.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}}}
	out := filepath.Join(dir, "out")
	sw, err := Prepare(Options{Source: sweep.Spec{TaskFile: tasks}, Output: out, Plan: oneSlot, Execute: execute.Options{Process: execute.Process{TempDir: dir}}})
	if err != nil {
		t.Fatal(err)
	}
	session, err := sw.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if o, err := session.Wait(); err != nil || o.Summary.Succeeded != 1 || o.Note != "done" {
		t.Fatalf("outcome %+v, %v", o, err)
	}
	sw.Close()
	tests := []struct {
		description string
		opts        Options
		want        string
	}{
		{"another sweep in the directory", Options{Source: sweep.Spec{Grid: grid, Command: []string{"echo"}}, Output: out, Plan: oneSlot},
			out + " holds another sweep: the source was a task file, now a grid file"},
		{"restart and retry-failed", Options{Source: sweep.Spec{TaskFile: tasks}, Output: out, Plan: oneSlot, Restart: true, RetryFailed: true}, "a restart reruns everything"},
		{"requeue outside a batch job", Options{Source: sweep.Spec{TaskFile: tasks}, Output: out, Plan: oneSlot, Requeue: true}, "not a run outside a batch job"},
		{"a run that asks for more than the node has", Options{Source: sweep.Spec{TaskFile: big}, Output: filepath.Join(dir, "o3"),
			Execute: execute.Options{Policy: execute.Policy{Topology: twoCPUs, Request: pack.Request{CPUs: 1}}}},
			"big.txt:3: gpus=0 cpus=4: the node has 2 CPUs: never fits this node"},
		{"a run that asks for CPUs with nothing to place them on", Options{Source: sweep.Spec{TaskFile: big}, Output: filepath.Join(dir, "o4")},
			"big.txt:3: gpus=0 cpus=4: nothing to place it on"},
		{"a rule that matches no run", Options{Source: sweep.Spec{Grid: grid, Command: []string{"echo"}, Requests: []string{"a=3: cpus=1"}},
			Output: filepath.Join(dir, "o5"), Execute: execute.Options{Policy: execute.Policy{Topology: twoCPUs}}},
			`request rule "a=3: cpus=1" matches no run of ` + grid},
		{"a missing program", Options{Source: sweep.Spec{Hydra: true, Command: []string{"no-such-program-x", "a=1,2"}}, Output: filepath.Join(dir, "o2"), Plan: oneSlot, CheckPrograms: true},
			`program "no-such-program-x" not found`},
	}
	for _, tc := range tests {
		if _, err := Prepare(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.description, err, tc.want)
		}
	}
}

// TestLeftIsWhatARerunRuns stops a resumed sweep whose ledger knows runs
// that succeeded, failed and left the sweep, and checks the count of what
// is left (the end record's, a requeue's) against the runs of the source
// that the ledger does not say are done.
func TestLeftIsWhatARerunRuns(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.txt")
	out := filepath.Join(dir, "out")
	sweepOnce := func(lines string, retryFailed bool, stopAt string) Outcome {
		t.Helper()
		if err := os.WriteFile(tasks, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		opts := Options{Source: sweep.Spec{TaskFile: tasks}, Output: out, Plan: oneSlot, RetryFailed: retryFailed,
			Execute: execute.Options{
				Policy: execute.Policy{
					Parallel: 1,
				},
				Process: execute.Process{
					TempDir: dir,
					Grace:   time.Second,
				},
				Hooks: execute.Hooks{
					OnEvent: func(ev run.Event) {
						if ev.Kind == run.Started && stopAt != "" && ev.Run.Args[2] == stopAt {
							cancel(Interrupt{Reason: "SIGTERM"})
						}
					},
				},
			}}
		sw, err := Prepare(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer sw.Close()
		session, err := sw.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := session.Wait() // interrupted: the error says so, the outcome is checked
		return o
	}
	first := sweepOnce("true a\ntrue b\nfalse c\nfalse d\ntrue e\n", false, "")
	if first.Left != 0 || first.Summary.Failed != 2 {
		t.Fatalf("first session: %d left, %d failed; want none left, 2 failed", first.Left, first.Summary.Failed)
	}
	for _, tc := range []struct {
		description string
		lines       string
		retryFailed bool
		want        int
	}{
		{"failed runs skipped, one removed, new ones stopped", "true a\nfalse c\ntrue e\nsleep 30\ntrue f\ntrue g\n", false, 3},
		{"failed runs retried and failing again", "true a\nfalse c\nfalse d\ntrue e\nsleep 30\ntrue f\ntrue g\n", true, 3},
	} {
		t.Run(tc.description, func(t *testing.T) {
			o := sweepOnce(tc.lines, tc.retryFailed, "sleep 30")
			if o.Interrupt == nil {
				t.Fatalf("not interrupted: %+v", o)
			}
			log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sw, err := Prepare(Options{Source: sweep.Spec{TaskFile: tasks}, Output: out, Plan: oneSlot})
			if err != nil {
				t.Fatal(err)
			}
			defer sw.Close()
			recount := 0
			for run, err := range sw.Runs() {
				if err != nil {
					t.Fatal(err)
				}
				// A rerun runs what is neither succeeded nor failed — failed
				// before this session too, with --retry-failed.
				r, known := log.Run(run.ID)
				failedNow := known && r.State == ledger.StateFailed && r.Session == len(log.Sessions)-1
				if !known || r.State != ledger.StateSucceeded && (r.State != ledger.StateFailed || tc.retryFailed && !failedNow) {
					recount++
				}
			}
			if o.Left != recount || o.Left != tc.want {
				t.Errorf("%d left, the ledger leaves %d, want %d", o.Left, recount, tc.want)
			}
			if log.End == nil || log.End.Deferred != tc.want {
				t.Errorf("end record %+v, want %d deferred", log.End, tc.want)
			}
		})
	}
}

// TestMetricsInTheLedger: what a run appends to $NODEPACK_METRICS goes to
// its finished record (last values, with metrics.json's on top, and a
// curve of a few points), with its params in its started record, so the
// results table needs no file of the run's; a run whose nodepack was
// killed before it ended (no finished record) is read from its files, and
// shows the same.
func TestMetricsInTheLedger(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "p.jsonl")
	os.WriteFile(params, []byte(`{"lr": 0.1}`+"\n"+`{"lr": 0.01}`+"\n"), 0o644)
	out := filepath.Join(dir, "out")
	script := filepath.Join(dir, "train.sh")
	os.WriteFile(script, []byte(`lr=${1#--lr=}
for i in $(seq 1 40); do echo "{\"step\": $((i*10)), \"loss\": $(awk "BEGIN{print $lr / $i}")}" >> "$NODEPACK_METRICS"; done
echo 'not json' >> "$NODEPACK_METRICS"
[ "$lr" = 0.1 ] && echo '{"acc": 0.9}' > "$NODEPACK_RUN_DIR/metrics.json"
true
`), 0o644)
	opts := Options{Source: sweep.Spec{Params: params, Command: []string{"bash", script}}, Output: out, Plan: oneSlot,
		Execute: execute.Options{Policy: execute.Policy{Parallel: 1}, Process: execute.Process{TempDir: dir}}}
	sw, err := Prepare(opts)
	if err != nil {
		t.Fatal(err)
	}
	session, err := sw.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Wait(); err != nil {
		t.Fatal(err)
	}
	sw.Close()
	log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = log.LastAll(func(i int, st *ledger.Started, fin *ledger.Finished) error {
		id := log.At(i).ID
		if st.Params == nil || fin.Metrics == nil || fin.Curves == nil || fin.MetricsSkipped != 1 {
			t.Fatalf("run %s: params %s, metrics %s, curves %s, skipped %d", id, st.Params, fin.Metrics, fin.Curves, fin.MetricsSkipped)
		}
		var curves map[string][][2]float64
		if err := json.Unmarshal(fin.Curves, &curves); err != nil || len(curves["loss"]) > 12 || curves["loss"][len(curves["loss"])-1][0] != 400 {
			t.Errorf("run %s: curves %s (%v): want at most 12 points, the last at step 400", id, fin.Curves, err)
		}
		return nil
	})
	if err != nil || log.Len() != 2 {
		t.Fatalf("%d runs: %v", log.Len(), err)
	}
	// The table from the records alone: the runs' params.json may go.
	fromRecords, err := results.Read(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range fromRecords.Rows {
		got[string(row.Params["lr"])] = string(row.Metrics["loss"]) + " " + string(row.Metrics["acc"])
	}
	if got["0.1"] != "0.0025 0.9" || got["0.01"] != "0.00025 " {
		t.Errorf("loss and acc by lr: %v", got)
	}
	// As a kill -9 leaves it: no finished records. The files say the same.
	var kept []string
	for _, line := range strings.SplitAfter(readText(t, filepath.Join(out, ledger.FileName(0, 1))), "\n") {
		if !strings.Contains(line, `"type":"finished"`) && !strings.Contains(line, `"type":"end"`) {
			kept = append(kept, line)
		}
	}
	os.WriteFile(filepath.Join(out, ledger.FileName(0, 1)), []byte(strings.Join(kept, "")), 0o644)
	fromFiles, err := results.Read(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range fromFiles.Rows {
		if want := got[string(row.Params["lr"])]; string(row.Metrics["loss"])+" "+string(row.Metrics["acc"]) != want {
			t.Errorf("killed: lr %s: loss and acc %s %s, want %s", row.Params["lr"], row.Metrics["loss"], row.Metrics["acc"], want)
		}
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeadlinesLeaveTimeForCheckpoints: with a checkpoint signal, a stop
// can take a grace for the checkpoint and one for SIGTERM, so --stop-before
// stops the runs twice the grace (and the margin) before the job's end;
// without, once.
func TestDeadlinesLeaveTimeForCheckpoints(t *testing.T) {
	end := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		sig  syscall.Signal
		want time.Duration
	}{{0, 30*time.Second + terminateMargin}, {syscall.SIGUSR1, 60*time.Second + terminateMargin}} {
		s := &Sweep{opts: Options{StopBefore: 10 * time.Minute}}
		s.opts.Execute.Grace, s.opts.Execute.CheckpointSignal = 30*time.Second, tc.sig
		drain, term := s.deadlines(end)
		if got := end.Sub(term); got != tc.want || end.Sub(drain) != 10*time.Minute {
			t.Errorf("signal %v: drain %v and terminate %v before the end, want 10m0s and %v", tc.sig, end.Sub(drain), got, tc.want)
		}
	}
}

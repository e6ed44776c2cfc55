package execute

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// trainer is a training that checkpoints as the contract asks: every 20
// steps, and on SIGUSR1 (at once, after its current step), its step in
// $NODEPACK_CHECKPOINT_DIR/step, which it resumes from. With lineless, it
// says nothing of its checkpoints but by the folder. It touches ready at
// step 30 of its first attempt, and fails its first attempt at step 50
// when failOnce.
func trainer(ready string, lineless, failOnce bool) string {
	report := `echo "{\"step\": $step, \"checkpoint\": $step}" >> "$NODEPACK_METRICS"`
	if lineless {
		report = ":"
	}
	fail := ""
	if failOnce {
		fail = `[ $step -eq 50 ] && [ "$NODEPACK_ATTEMPT" = 1 ] && exit 1;`
	}
	return `ck="$NODEPACK_CHECKPOINT_DIR"; step=0
[ -f "$ck/step" ] && step=$(cat "$ck/step")
save() { echo $step > "$ck/step.tmp"; mv "$ck/step.tmp" "$ck/step"; ` + report + `; }
trap save USR1
while [ $step -lt 200 ]; do
  step=$((step+1)); echo "{\"step\": $step, \"loss\": 1}" >> "$NODEPACK_METRICS"
  [ $((step % 20)) -eq 0 ] && save
  [ $step -eq 30 ] && [ "$NODEPACK_ATTEMPT" = 1 ] && touch ` + ready + `
  ` + fail + `
  sleep 0.02
done`
}

// TestCheckpointBeforeStop: with a checkpoint signal, a stop of
// nodepack's (here a cancel) asks the run for a checkpoint and waits for
// it, by its metrics line or by its folder changing, so that the stop
// loses at most the steps the run made while nodepack saw the checkpoint
// and sent SIGTERM (a few, on a loaded machine); without one, it loses
// what the run did since its last checkpoint, at most its interval (20).
// The attempt's Finished event says how far it got, and the checkpoint
// the run left says the same. The checkpoint a stop waits for is one the
// run saved after it was asked: with no read of its metrics before the
// stop (unread, an interval of an hour), the checkpoint of step 20 that
// no read had seen yet does not end the wait.
func TestCheckpointBeforeStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sig      syscall.Signal
		lineless bool
		unread   bool    // nothing read before the stop
		most     float64 // steps lost at most
	}{
		{"signal, a metrics line", syscall.SIGUSR1, false, false, 5},
		{"signal, the folder alone", syscall.SIGUSR1, true, false, 5},
		{"signal, a metrics line, unread", syscall.SIGUSR1, false, true, 5},
		{"signal, the folder alone, unread", syscall.SIGUSR1, true, true, 5},
		{"no signal", 0, false, false, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ready := filepath.Join(t.TempDir(), "ready")
			go func() {
				waitForFile(t, ready) // step 30, between checkpoints
				cancel()
			}()
			opts := Options{Policy: Policy{PruneInterval: 100 * time.Millisecond}, Process: Process{CheckpointSignal: tc.sig, Grace: 20 * time.Second}}
			if tc.unread {
				opts.PruneInterval = time.Hour
			}
			_, events, _ := execute(t, ctx, lanes(1), opts,
				run.Run{ID: "train", Args: []string{"bash", "-c", trainer(ready, tc.lineless, false)}})
			if len(events) != 1 || events[0].Reason != run.Interrupted {
				t.Fatalf("events %+v: want one, interrupted", events)
			}
			st := events[0].Steps
			if st == nil || st.First != 1 || st.Last < 30 {
				t.Fatalf("steps %+v: want from 1 to at least 30", st)
			}
			t.Logf("steps %+v, lost %v", *st, st.Lost())
			if st.Checkpoint < 20 || st.Lost() > tc.most {
				t.Errorf("steps %+v: lost %v, want a checkpoint and at most %v lost", st, st.Lost(), tc.most)
			}
			// The event claims no later checkpoint than the run saved:
			// by its line, the very step; by its folder, one between the
			// step nodepack had read before the change and the one after.
			path := filepath.Join(filepath.Dir(events[0].Stdout), CheckpointDir, "step")
			b, err := os.ReadFile(path)
			saved, perr := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
			if err != nil || perr != nil || saved < st.Checkpoint || saved > st.Last || !tc.lineless && saved != st.Checkpoint {
				t.Errorf("%s: %q, %v; the event says a checkpoint at %v", path, b, err, st.Checkpoint)
			}
		})
	}
}

// TestCheckpointFolderIsTheRuns: every attempt of a run gets the same
// checkpoint folder, in its run directory; a retry resumes from the
// checkpoint there, and its Finished event starts from it.
func TestCheckpointFolderIsTheRuns(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	out := t.TempDir()
	_, events, err := execute(t, t.Context(), lanes(1), Options{Policy: Policy{Retries: 1}, Process: Process{OutputDir: out}},
		run.Run{ID: "train", Args: []string{"bash", "-c", trainer(ready, false, true)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Reason != run.Failed || events[1].Reason != run.OK {
		t.Fatalf("events %+v: want a failure, then a success", events)
	}
	first, second := events[0].Steps, events[1].Steps
	if first == nil || first.Last != 50 || first.Checkpoint != 40 || first.Lost() != 10 {
		t.Errorf("first attempt's steps %+v: want to 50, its checkpoint at 40, 10 lost", first)
	}
	if second == nil || second.First != 41 || second.Last != 200 {
		t.Errorf("second attempt's steps %+v: want from 41 (after its checkpoint) to 200", second)
	}
	dir := filepath.Join(filepath.Dir(events[0].Stdout), CheckpointDir)
	if b, err := os.ReadFile(filepath.Join(dir, "step")); err != nil || strings.TrimSpace(string(b)) != "200" {
		t.Errorf("%s/step: %q, %v; want the last checkpoint, 200", dir, b, err)
	}
}

// TestPruneJudgesAtTheRung: the pruning policy reads a run's metrics when
// its pace says it reaches its next rung, so a run of 50 steps a second
// is stopped within a few steps of its rung, not up to a second's worth
// (50 steps) past it.
func TestPruneJudgesAtTheRung(t *testing.T) {
	line := func(loss string) string {
		return `for i in $(seq 200); do echo "{\"step\": $i, \"loss\": ` + loss + `}" >> "$NODEPACK_METRICS"; sleep 0.02; done`
	}
	var judged []run.Judgement
	var mu sync.Mutex
	opts := Options{
		Policy: Policy{
			Prune: &schedule.Prune{Metric: "loss", FirstStep: 75, MaxStep: 200},
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Judged {
					mu.Lock()
					judged = append(judged, *ev.Judgement)
					mu.Unlock()
				}
			},
		},
	}
	_, events, err := execute(t, t.Context(), lanes(1), opts, shell(line("0.1"), line("0.9"))...)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].Reason != run.Pruned {
		t.Fatalf("events %+v: want the second pruned", events)
	}
	// What a stop's lateness costs: the steps the pruned run made past
	// its rung.
	if st := events[1].Steps; st == nil || st.Last-75 > 10 {
		t.Errorf("the pruned run's steps %+v: want it stopped within 10 steps of its rung, 75", st)
	} else {
		t.Logf("the pruned run stopped at step %v; judgements %+v", st.Last, judged)
	}
}

// TestCheckpointAskedOnlyOfRunsThatKeepThem: a run that has not saved a
// checkpoint (none reported, its folder empty) is not sent the signal:
// it would die of it, or leave the stop waiting for the whole grace.
func TestCheckpointAskedOnlyOfRunsThatKeepThem(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := filepath.Join(t.TempDir(), "ready")
	go func() {
		waitForFile(t, ready)
		cancel()
	}()
	start := time.Now()
	_, events, _ := execute(t, ctx, lanes(1), Options{Process: Process{CheckpointSignal: syscall.SIGUSR1, Grace: 20 * time.Second}},
		run.Run{ID: "plain", Args: []string{"bash", "-c", "trap 'exit 42' USR1; touch " + ready + "; while true; do sleep 0.02; done"}})
	if len(events) != 1 || events[0].ExitCode == 42 || events[0].Reason != run.Interrupted {
		t.Fatalf("events %+v: want one, interrupted by SIGTERM, not by the checkpoint signal", events)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the stop took %v: it waited for a checkpoint that no run keeps", d)
	}
}

// TestCheckpointAskedOfARunThatSaysItKeepsThem: a run that says it keeps
// checkpoints before its first ({"checkpoint": 0}) is asked for one at a
// stop that comes before nodepack's next read of its metrics (they are
// read once more before the stop decides), and saves its step; one that
// does not say so is not asked.
func TestCheckpointAskedOfARunThatSaysItKeepsThem(t *testing.T) {
	for _, says := range []bool{true, false} {
		t.Run(map[bool]string{true: "it says so", false: "it does not"}[says], func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			dir := t.TempDir()
			ready, saved := filepath.Join(dir, "ready"), filepath.Join(dir, "saved")
			go func() {
				waitForFile(t, ready)
				cancel()
			}()
			declare := ""
			if says {
				declare = `echo '{"checkpoint": 0}' >> "$NODEPACK_METRICS"; `
			}
			// It saves, then says so: the stop that waits for the line
			// may end it at once after.
			script := declare + `step=0
save() { touch ` + saved + `; echo "{\"step\": $step, \"checkpoint\": $step}" >> "$NODEPACK_METRICS"; }
trap save USR1
while :; do step=$((step+1)); echo "{\"step\": $step, \"loss\": 1}" >> "$NODEPACK_METRICS"; [ $step -eq 3 ] && touch ` + ready + `; sleep 0.02; done`
			_, events, _ := execute(t, ctx, lanes(1), Options{Policy: Policy{PruneInterval: time.Hour}, Process: Process{OutputDir: dir, CheckpointSignal: syscall.SIGUSR1, Grace: 20 * time.Second}},
				run.Run{ID: "train", Args: []string{"bash", "-c", script}})
			if len(events) != 1 || events[0].Reason != run.Interrupted || events[0].Steps == nil {
				t.Fatalf("events %+v: want one, interrupted, with its steps", events)
			}
			_, err := os.Stat(saved)
			if st := events[0].Steps; says && (err != nil || st.Checkpoint < 3) || !says && (err == nil || st.Checkpoint != 0) {
				t.Errorf("asked for a checkpoint: %v, steps %+v; want asked %v", err == nil, *st, says)
			}
		})
	}
}

// TestPausePromote: a run judged out that keeps checkpoints is paused,
// not lost; once the source has no run left, it is promoted when the
// runs after it make it one of its rung's best (here three worse runs,
// which keep no checkpoint and are pruned), resumes from its checkpoint,
// and finishes: it was a slow starter.
func TestPausePromote(t *testing.T) {
	// loss: 0.9 up to step 12, 0.1 after; a checkpoint every 5 steps.
	slow := `ck="$NODEPACK_CHECKPOINT_DIR"; step=0
[ -f "$ck/step" ] && step=$(cat "$ck/step")
while [ $step -lt 40 ]; do
  step=$((step+1)); loss=0.9; [ $step -gt 12 ] && loss=0.1
  echo "{\"step\": $step, \"loss\": $loss}" >> "$NODEPACK_METRICS"
  if [ $((step % 5)) -eq 0 ]; then echo $step > "$ck/step"; echo "{\"step\": $step, \"checkpoint\": $step}" >> "$NODEPACK_METRICS"; fi
  sleep 0.02
done`
	plain := func(loss string) string {
		return `for i in $(seq 40); do echo "{\"step\": $i, \"loss\": ` + loss + `}" >> "$NODEPACK_METRICS"; sleep 0.02; done`
	}
	var mu sync.Mutex
	var judged []run.Judgement
	opts := Options{
		Policy: Policy{
			Prune: &schedule.Prune{Metric: "loss", FirstStep: 10, MaxStep: 40},
		},
		Process: Process{
			OutputDir: t.TempDir(),
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Judged {
					mu.Lock()
					judged = append(judged, *ev.Judgement)
					mu.Unlock()
				}
			},
		},
	}
	sum, events, err := execute(t, t.Context(), lanes(1), opts, shell(plain("0.5"), slow, plain("2"), plain("2"), plain("2"))...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		got = append(got, fmt.Sprintf("%d:%s", ev.Run.Index, ev.Reason))
	}
	if want := "0:ok 1:paused 2:pruned 3:pruned 4:pruned 1:ok"; strings.Join(got, " ") != want {
		t.Fatalf("attempts ended %q, want %q", strings.Join(got, " "), want)
	}
	last := events[len(events)-1]
	if last.Attempt != 2 || !last.Promoted {
		t.Errorf("the last attempt %d (promoted %v): want run 1's second, a promotion", last.Attempt, last.Promoted)
	}
	if st, first := last.Steps, events[1].Steps; st == nil || first == nil || st.First != first.Checkpoint+1 || st.Last != 40 {
		t.Errorf("the promotion's steps %+v after the pause's %+v: want from the checkpoint on, to 40", st, first)
	}
	if sum.Paused != 0 || sum.Promoted != 1 || sum.Pruned != 3 || sum.Succeeded != 2 {
		t.Errorf("summary %+v: want 1 promotion, none paused at the end, 3 pruned, 2 succeeded", sum)
	}
	// Judged once at each rung: the promotion is not judged again at the
	// rung it was paused at.
	seen := map[int]int{}
	for _, j := range judged {
		if j.Run != last.Run.ID {
			continue
		}
		seen[j.Rung]++
		if j.Rung == 0 && !(j.Stop && j.Pause) || j.Rung == 1 && j.Stop {
			t.Errorf("run 1 at rung %d: %+v, want a pause at rung 0 and on at rung 1", j.Rung, j)
		}
	}
	if seen[0] != 1 || seen[1] != 1 {
		t.Errorf("run 1 judged %v times at rung 0 and %v at rung 1: want once each", seen[0], seen[1])
	}
}

// TestPauseWaitsForCheckpoint: the stop of a run judged out asks for a
// checkpoint (--checkpoint-signal) and goes on once the watch reads it:
// the pause loses (almost) nothing, and comes within a few steps of the
// rung, not when the run ends by itself.
func TestPauseWaitsForCheckpoint(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	plain := `for i in $(seq 200); do echo "{\"step\": $i, \"loss\": 0.5}" >> "$NODEPACK_METRICS"; sleep 0.02; done`
	opts := Options{
		Policy: Policy{
			Prune: &schedule.Prune{Metric: "loss", FirstStep: 25, MaxStep: 200},
		},
		Process: Process{
			OutputDir:        t.TempDir(),
			CheckpointSignal: syscall.SIGUSR1,
			Grace:            20 * time.Second,
		},
	}
	_, events, err := execute(t, t.Context(), lanes(1), opts, shell(plain, trainer(ready, false, false))...)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].Reason != run.Paused {
		t.Fatalf("events %+v: want the second paused (loss 1 against 0.5, a checkpoint at step 20)", events)
	}
	st := events[1].Steps
	if st == nil || st.Last > 45 || st.Lost() > 5 {
		t.Errorf("the paused attempt's steps %+v: want it stopped within 20 steps of its rung (25), after a checkpoint (at most 5 steps lost)", st)
	}
}

// TestPausedRunsWithoutPolicy: a run an earlier session paused, run
// without a pruning policy, runs (from its checkpoint) as a promotion:
// its events say so, so that it is not counted twice.
func TestPausedRunsWithoutPolicy(t *testing.T) {
	r := shell(`echo "{\"step\": 1, \"loss\": 1}" >> "$NODEPACK_METRICS"`)[0]
	r.Paused = true
	sum, events, err := execute(t, t.Context(), lanes(1), Options{Process: Process{OutputDir: t.TempDir()}}, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Reason != run.OK || !events[0].Promoted || sum.Succeeded != 1 || sum.Paused != 0 {
		t.Fatalf("events %+v, summary %+v: want it run to its end, as a promotion", events, sum)
	}
}

// TestForecastCoverageInSummary: under the forecast rule the summary says
// how the forecasts' intervals held on the runs that finished. 19 runs of
// one family of curves finish first (the best last, so no rank rung stops
// one); the two after them are forecast from those, and end a little
// worse than forecast: held.
func TestForecastCoverageInSummary(t *testing.T) {
	var lines []string
	for k := range 21 {
		final := 0.1 + 0.01*float64(20-k)
		end := final
		if k >= 19 {
			end += 0.01
		}
		lines = append(lines, fmt.Sprintf(`for s in 1 2 3 4 5 6 7 8 9; do awk -v s=$s 'BEGIN { printf "{\"step\": %%d, \"loss\": %%.6f}\n", s, %v + 0.5 / s }' >> "$NODEPACK_METRICS"; done; echo '{"step": 10, "loss": %v}' >> "$NODEPACK_METRICS"`, final, end))
	}
	opts := Options{Policy: Policy{Prune: &schedule.Prune{Metric: "loss", MaxStep: 10, Forecast: true}}}
	sum, _, err := execute(t, t.Context(), lanes(1), opts, shell(lines...)...)
	if err != nil {
		t.Fatal(err)
	}
	if f := sum.Forecasts; f.Forecasts < 1 || f.Held != f.Forecasts {
		t.Errorf("summary's forecasts %+v: want some, every one held", f)
	}
}

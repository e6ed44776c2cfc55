package execute

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack/schedule"
	"github.com/nodepack/nodepack/runner/run"
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
// what the run did since its last checkpoint, at most its interval (20). The attempt's
// Finished event says how far it got.
func TestCheckpointBeforeStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sig      syscall.Signal
		lineless bool
		most     float64 // steps lost at most
	}{
		{"signal, a metrics line", syscall.SIGUSR1, false, 5},
		{"signal, the folder alone", syscall.SIGUSR1, true, 5},
		{"no signal", 0, false, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ready := filepath.Join(t.TempDir(), "ready")
			go func() {
				waitForFile(t, ready)
				time.Sleep(300 * time.Millisecond) // past step 30, between checkpoints
				cancel()
			}()
			_, events, _ := execute(t, ctx, lanes(1), Options{CheckpointSignal: tc.sig, Grace: 20 * time.Second},
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
		})
	}
}

// TestCheckpointFolderIsTheRuns: every attempt of a run gets the same
// checkpoint folder, in its run directory; a retry resumes from the
// checkpoint there, and its Finished event starts from it.
func TestCheckpointFolderIsTheRuns(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	out := t.TempDir()
	_, events, err := execute(t, t.Context(), lanes(1), Options{OutputDir: out, Retries: 1},
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
	opts := Options{Prune: &schedule.Prune{Metric: "loss", FirstStep: 75, MaxStep: 200}, OnEvent: func(ev run.Event) {
		if ev.Kind == run.Judged {
			mu.Lock()
			judged = append(judged, *ev.Judgement)
			mu.Unlock()
		}
	}}
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
	_, events, _ := execute(t, ctx, lanes(1), Options{CheckpointSignal: syscall.SIGUSR1, Grace: 20 * time.Second},
		run.Run{ID: "plain", Args: []string{"bash", "-c", "trap 'exit 42' USR1; touch " + ready + "; while true; do sleep 0.02; done"}})
	if len(events) != 1 || events[0].ExitCode == 42 || events[0].Reason != run.Interrupted {
		t.Fatalf("events %+v: want one, interrupted by SIGTERM, not by the checkpoint signal", events)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the stop took %v: it waited for a checkpoint that no run keeps", d)
	}
}

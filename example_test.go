package nodepack_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Example runs a Hydra sweep of three seeds on this node, wired as the
// nodepack command wires it, and resumes it: the second call finds every
// run done in the output directory's ledger.
func Example() {
	out, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)
	opts := nodepack.Options{Options: runner.Options{Output: out,
		Source: sweep.Spec{Hydra: true, Command: []string{"echo", "seed=1,2,3"}}}}
	for range 2 {
		o, err := nodepack.Run(context.Background(), opts)
		fmt.Printf("%d ran, %d skipped as done before, error %v\n", o.Summary.Succeeded, o.Resumed.SkippedSucceeded, err)
	}
	// Output:
	// 3 ran, 0 skipped as done before, error <nil>
	// 0 ran, 3 skipped as done before, error <nil>
}

// Example_prune stops runs early: four learning rates, one run at a time
// here so that the judgements come in a known order, each run appending
// its loss per step to the file $NODEPACK_METRICS names. At steps 2 and 6
// (first 2, eta 3, last step 8) a run outside the best third of those
// that reached the step before is stopped: it is pruned, neither failed
// nor run again, and its CPUs go to the next run at once.
func Example_prune() {
	out, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)
	// The training script's side: one line per step (braces doubled: a
	// sweep's command fills in {placeholders}).
	train := `level=${1#level=}; for step in 1 2 3 4 5 6 7 8; do
  echo "{{\"step\": $step, \"loss\": $(awk "BEGIN {{ print $level + 1 / $step }}")}}" >> "$NODEPACK_METRICS"; sleep 0.05
done`
	opts := nodepack.Options{Options: runner.Options{Output: out,
		Source:  sweep.Spec{Hydra: true, Command: []string{"bash", "-c", train, "train", "level=0.5,0.9,0.3,0.8"}},
		Execute: execute.Options{Policy: execute.Policy{Parallel: 1, Prune: &schedule.Prune{Metric: "loss", FirstStep: 2, MaxStep: 8}, PruneInterval: 20 * time.Millisecond}}}}
	o, err := nodepack.Run(context.Background(), opts)
	fmt.Printf("%d ran to their last step, %d pruned, error %v\n", o.Summary.Succeeded, o.Summary.Pruned, err)
	// Output:
	// 2 ran to their last step, 2 pruned, error <nil>
}

// Example_pause pauses instead of stopping: a run that keeps checkpoints
// (it saves them in $NODEPACK_CHECKPOINT_DIR and says so in its metrics)
// and is judged out at a rung is paused, and promoted once the runs after
// it make it one of its rung's best: it resumes from its checkpoint. Here
// "slow" starts worse than the first run (0.9 against 0.5 at step 3) and
// ends better (0.1); three worse runs after it keep no checkpoints and
// are pruned.
func Example_pause() {
	out, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)
	train := `level=${1#level=}; ck=$NODEPACK_CHECKPOINT_DIR; step=0
[ -f $ck/step ] && step=$(cat $ck/step)
while [ $step -lt 12 ]; do
  step=$((step+1)); loss=$level
  [ $level = slow ] && loss=0.9 && [ $step -gt 4 ] && loss=0.1
  echo "{{\"step\": $step, \"loss\": $loss}}" >> "$NODEPACK_METRICS"
  if [ $level = slow ] && [ $((step % 2)) = 0 ]; then
    echo $step > $ck/step; echo "{{\"step\": $step, \"checkpoint\": $step}}" >> "$NODEPACK_METRICS"
  fi
  sleep 0.05
done`
	opts := nodepack.Options{Options: runner.Options{Output: out,
		Source:  sweep.Spec{Hydra: true, Command: []string{"bash", "-c", train, "train", "level=0.5,slow,2,2,2"}},
		Execute: execute.Options{Policy: execute.Policy{Parallel: 1, Prune: &schedule.Prune{Metric: "loss", FirstStep: 3, MaxStep: 12}, PruneInterval: 20 * time.Millisecond}}}}
	o, err := nodepack.Run(context.Background(), opts)
	s := o.Summary
	fmt.Printf("%d ran to their last step (%d promoted), %d pruned, %d paused, error %v\n", s.Succeeded, s.Promoted, s.Pruned, s.Paused, err)
	// Output:
	// 2 ran to their last step (1 promoted), 3 pruned, 0 paused, error <nil>
}

// ExampleNotifyStop stops a sweep as a batch system's signal would: the
// run sleeps until the SIGTERM that scancel (or a walltime) sends to
// every process of the job; the sweep sends its runs SIGTERM, and a rerun
// of the same sweep resumes the run it interrupted.
func ExampleNotifyStop() {
	out, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)
	ctx, stop := nodepack.NotifyStop(context.Background(), func(sig syscall.Signal, before int) {
		if before == 0 {
			fmt.Println("stopping on", unix.SignalName(sig))
		}
	})
	defer stop()
	opts := nodepack.Options{Options: runner.Options{Output: out,
		Source: sweep.Spec{Hydra: true, Command: []string{"bash", "-c", `touch "$1"; sleep 60`, "run", out + "/started"}}}}
	go func() {
		for range 6000 { // a minute: the run marks its start
			if _, err := os.Stat(out + "/started"); err == nil {
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	o, err := nodepack.Run(ctx, opts)
	var stopped runner.Interrupt
	errors.As(context.Cause(ctx), &stopped)
	fmt.Printf("%d interrupted (%v); asks for a requeue: %v\n", o.Summary.Interrupted, err, stopped.Requeue)
	// Output:
	// stopping on SIGTERM
	// 1 interrupted (execute: interrupted: stopped by SIGTERM); asks for a requeue: false
}

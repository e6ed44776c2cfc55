package runner_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner"
)

func Example() {
	// One slot; a real plan comes from pack and carries GPUs and CPUs, e.g.
	// pack.Assignment{CPUs: []int{0, 1}} pins every run of the slot there.
	slots := []pack.Slot{{Index: 0}}
	runs := runner.Runs(
		runner.Run{ID: "hello", Args: []string{"echo", "hello"}},
		runner.Run{ID: "fails", Args: []string{"sh", "-c", "echo oops >&2; exit 3"}},
	)
	sum, err := runner.Execute(context.Background(), slots, runs, runner.Options{
		Live: os.Stdout, // OutputDir would also keep runs/<id>/stdout.log and stderr.log
		OnEvent: func(ev runner.Event) {
			if ev.Kind == runner.Finished {
				fmt.Printf("%s: %s, exit %d\n", ev.Run.ID, ev.Reason, ev.ExitCode)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Printf("%d succeeded, %d failed\n", sum.Succeeded, sum.Failed)
	// Output:
	// [hello] hello
	// hello: ok, exit 0
	// [fails] oops
	// fails: failed, exit 3
	// 1 succeeded, 1 failed
}

func ExampleReadTaskFile() {
	tasks := "# sweep\npython train.py --lr 0.1\n\npython train.py --lr 0.01\npython train.py --lr 0.1\n"
	for run, err := range runner.ReadTaskFile(strings.NewReader(tasks), "tasks.txt") {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(run.Index, run.Origin, run.ID, run.Args)
	}
	// Output:
	// 0 tasks.txt:2 6f124c82c242 [bash -c python train.py --lr 0.1]
	// 1 tasks.txt:4 8c3301acab3a [bash -c python train.py --lr 0.01]
	// 2 tasks.txt:5 6f124c82c242-2 [bash -c python train.py --lr 0.1]
}

package execute_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nodepack/nodepack/runner/execute"
)

func Example() {
	// One run at a time, placed nowhere. With a Topology (from
	// resources.Node.Topology) and a Request, or a Request per Run, each
	// run gets its own GPUs and pinned CPUs as it starts.
	runs := execute.Runs(
		execute.Run{ID: "hello", Args: []string{"echo", "hello"}},
		execute.Run{ID: "fails", Args: []string{"sh", "-c", "echo oops >&2; exit 3"}},
	)
	sum, err := execute.Execute(context.Background(), runs, execute.Options{
		Parallel: 1,
		Live:     os.Stdout, // OutputDir would also keep runs/<id>/stdout.log and stderr.log
		OnEvent: func(ev execute.Event) {
			if ev.Kind == execute.Finished {
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

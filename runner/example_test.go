package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Example runs a sweep of three commands, then, after the task file grew
// by one line, the same sweep again into the same output directory: the
// ledger there resumes it, so only the new run runs.
func Example() {
	dir, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	tasks := filepath.Join(dir, "tasks.txt")
	opts := runner.Options{
		Source: sweep.Spec{TaskFile: tasks},
		Output: filepath.Join(dir, "out"),
		// No Topology: the runs are not placed, and one per CPU runs at
		// once. Package nodepack places them on this node's GPUs and CPUs.
	}
	for _, lines := range []string{"echo a\necho b\necho c\n", "echo a\necho b\necho c\necho d\n"} {
		if err := os.WriteFile(tasks, []byte(lines), 0o644); err != nil {
			fmt.Println(err)
			return
		}
		sw, err := runner.Prepare(opts)
		if err != nil {
			fmt.Println(err)
			return
		}
		session, err := sw.Start(context.Background())
		if err != nil {
			fmt.Println(err)
			sw.Close()
			return
		}
		outcome, err := session.Wait()
		sw.Close()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d ran, %d succeeded, %d skipped as done before: %s\n",
			outcome.Summary.Runs, outcome.Summary.Succeeded, outcome.Resumed.SkippedSucceeded, outcome.Note)
	}
	// Output:
	// 3 ran, 3 succeeded, 0 skipped as done before: done
	// 1 ran, 1 succeeded, 3 skipped as done before: done
}

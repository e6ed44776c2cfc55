package nodepack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Example runs a resumable sweep on this node, wired as the nodepack
// command wires it, then the same sweep again: the ledger in the output
// directory has every run done, so none runs twice.
func Example() {
	dir, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	tasks := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(tasks, []byte("echo a\necho b\necho c\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	opts := nodepack.Options{Options: runner.Options{Source: sweep.Spec{TaskFile: tasks}, Output: filepath.Join(dir, "out")}}
	for range 2 {
		o, err := nodepack.Run(context.Background(), opts)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d ran, %d succeeded, %d skipped as done before\n", o.Summary.Runs, o.Summary.Succeeded, o.Resumed.SkippedSucceeded)
	}
	// Output:
	// 3 ran, 3 succeeded, 0 skipped as done before
	// 0 ran, 0 succeeded, 3 skipped as done before
}

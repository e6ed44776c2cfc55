package nodepack_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/runner"
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

// Command nodepack runs many small jobs (a sweep) inside one node
// allocation, each on its own GPUs and cores. See nodepack --help.
package main

import (
	"context"
	"os"

	"github.com/nodepack/nodepack/runner/execute"
)

func main() {
	execute.MaybeGuard() // first: the supervisor process does its work and exits here
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

package main

import (
	"github.com/nodepack/nodepack/runner/escape"
)

// termSafe is escape.Term: how nodepack prints text that came from runs
// or inputs.
func termSafe(s string) string { return escape.Term(s) }

//go:build !linux

package proc

// scratchPrefix is how a scratch root's name begins.
func scratchPrefix() string { return "nodepack-" }

// Nothing outlives the program here to clean up after it.
func trackScratch(string)       {}
func untrackScratch(string)     {}
func removeStaleScratch(string) {}

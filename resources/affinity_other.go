//go:build !linux

package resources

import "runtime"

// affinityCPUs returns 0..NumCPU-1: without sched_getaffinity the process
// is assumed to be allowed every CPU.
func affinityCPUs() ([]int, error) {
	ids := make([]int, runtime.NumCPU())
	for i := range ids {
		ids[i] = i
	}
	return ids, nil
}

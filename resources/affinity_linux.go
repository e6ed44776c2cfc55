//go:build linux

package resources

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// affinityCPUs returns the CPUs this process may run on. The mask already
// reflects Slurm's cpuset, srun --cpu-bind and taskset.
func affinityCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var ids []int
	for id := 0; id < len(set)*64; id++ {
		if set.IsSet(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

//go:build linux

package resources

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAffinityCPUs pins this test's thread to one CPU and checks that the
// allowed set follows the mask, as it does under taskset or a Slurm cpuset.
func TestAffinityCPUs(t *testing.T) {
	all, err := affinityCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != runtime.NumCPU() {
		t.Errorf("affinityCPUs = %v, want %d cpus", all, runtime.NumCPU())
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var orig, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &orig)
	last := all[len(all)-1]
	one.Set(last)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	got, err := affinityCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{last}) {
		t.Errorf("under a one-cpu mask affinityCPUs = %v, want [%d]", got, last)
	}
}

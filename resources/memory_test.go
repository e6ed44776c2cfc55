package resources

import (
	"testing"
	"testing/fstest"
)

func TestCgroupMemoryLimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		description string
		fsys        fstest.MapFS
		want        uint64
	}{
		{"no cgroup file", fstest.MapFS{}, 0},
		{"v2, limit on the job above the step", fstest.MapFS{
			"proc/self/cgroup": file("0::/slurm/job_42/step_batch\n"),
			"sys/fs/cgroup/slurm/job_42/step_batch/memory.max": file("max\n"),
			"sys/fs/cgroup/slurm/job_42/memory.max":            file("8589934592\n"),
			"sys/fs/cgroup/slurm/memory.max":                   file("17179869184\n"),
		}, 8 << 30},
		{"v2 unlimited", fstest.MapFS{
			"proc/self/cgroup":         file("0::/user.slice\n"),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}, 0},
		{"v1 memory controller", fstest.MapFS{
			"proc/self/cgroup": file("12:cpuset:/job\n5:memory:/slurm/uid_0/job_7\n0::/\n"),
			"sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.limit_in_bytes": file("4294967296\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                   file("9223372036854771712\n"),
		}, 4 << 30},
		{"hybrid: v2 under unified", fstest.MapFS{
			"proc/self/cgroup":                     file("0::/job\n"),
			"sys/fs/cgroup/unified/job/memory.max": file("1073741824\n"),
		}, 1 << 30},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := cgroupMemoryLimit(tc.fsys); got != tc.want {
				t.Errorf("cgroupMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMemoryUsable(t *testing.T) {
	for _, tc := range []struct {
		m    Memory
		want uint64
	}{
		{Memory{}, 0},
		{Memory{TotalBytes: 100}, 100},
		{Memory{TotalBytes: 100, CgroupLimitBytes: 60, SlurmBytes: 80}, 60},
		{Memory{TotalBytes: 100, SlurmBytes: 80}, 80},
	} {
		if got := tc.m.Usable(); got != tc.want {
			t.Errorf("%+v.Usable() = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		description string
		m           Memory
		want        uint64
	}{
		{"nothing known", Memory{}, 0},
		{"only the total", Memory{TotalBytes: 100}, 100},
		{"available when no job limit is set", Memory{TotalBytes: 100, AvailableBytes: 70}, 70},
		{"the cgroup limit over what is available", Memory{TotalBytes: 100, AvailableBytes: 70, CgroupLimitBytes: 90}, 90},
		{"the smaller of the job's limits", Memory{TotalBytes: 100, AvailableBytes: 70, CgroupLimitBytes: 60, SlurmBytes: 50}, 50},
	} {
		if got := tc.m.Budget(); got != tc.want {
			t.Errorf("%s: %+v.Budget() = %d, want %d", tc.description, tc.m, got, tc.want)
		}
	}
}

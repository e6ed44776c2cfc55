package resources

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadCPUs(t *testing.T) {
	tests := []struct {
		description  string
		machine      machine
		fsys         fstest.MapFS // overrides machine.tree()
		allowed      []int
		want         []CPU
		wantWarnings int
	}{
		{
			description: "two sockets, hyperthreads: core ids repeat per socket",
			machine:     dualSocketHT,
			allowed:     []int{0, 4, 8, 12},
			want: []CPU{
				{ID: 0, Core: 0, Socket: 0, NUMA: 0},
				{ID: 4, Core: 0, Socket: 1, NUMA: 1},
				{ID: 8, Core: 0, Socket: 0, NUMA: 0},
				{ID: 12, Core: 0, Socket: 1, NUMA: 1},
			},
		},
		{
			description: "non-contiguous Slurm cpuset keeps only allowed CPUs",
			machine:     dualSocketHT,
			allowed:     []int{12, 2, 3, 7, 9, 10, 11},
			want: []CPU{
				{ID: 2, Core: 2, Socket: 0, NUMA: 0},
				{ID: 3, Core: 3, Socket: 0, NUMA: 0},
				{ID: 7, Core: 3, Socket: 1, NUMA: 1},
				{ID: 9, Core: 1, Socket: 0, NUMA: 0},
				{ID: 10, Core: 2, Socket: 0, NUMA: 0},
				{ID: 11, Core: 3, Socket: 0, NUMA: 0},
				{ID: 12, Core: 0, Socket: 1, NUMA: 1},
			},
		},
		{
			description: "four NUMA nodes on two sockets",
			machine:     fourNUMA,
			allowed:     []int{0, 3, 4, 8, 12, 15},
			want: []CPU{
				{ID: 0, Core: 0, Socket: 0, NUMA: 0},
				{ID: 3, Core: 3, Socket: 0, NUMA: 0},
				{ID: 4, Core: 4, Socket: 0, NUMA: 1},
				{ID: 8, Core: 0, Socket: 1, NUMA: 2},
				{ID: 12, Core: 4, Socket: 1, NUMA: 3},
				{ID: 15, Core: 7, Socket: 1, NUMA: 3},
			},
		},
		{
			description:  "offline CPUs are dropped with a warning",
			machine:      offlineCPUs,
			allowed:      []int{5, 6, 7, 14},
			want:         []CPU{{ID: 5, Core: 1, Socket: 1, NUMA: 1}, {ID: 7, Core: 3, Socket: 1, NUMA: 1}},
			wantWarnings: 1,
		},
		{
			description:  "no sysfs topology: every CPU is its own core",
			fsys:         fstest.MapFS{},
			allowed:      []int{0, 1},
			want:         []CPU{{ID: 0, Core: 0, NUMA: -1}, {ID: 1, Core: 1, NUMA: -1}},
			wantWarnings: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			fsys := tc.fsys
			if fsys == nil {
				fsys = tc.machine.tree()
			}
			got, warnings, err := readCPUs(fsys, tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("readCPUs = %+v\nwant %+v", got, tc.want)
			}
			if len(warnings) != tc.wantWarnings {
				t.Errorf("warnings = %q, want %d", warnings, tc.wantWarnings)
			}
		})
	}
}

func TestReadCPUsBadSysfs(t *testing.T) {
	fsys := dualSocketHT.tree()
	fsys[cpuDir+"/cpu1/topology/core_id"] = &fstest.MapFile{Data: []byte("one\n")}
	_, _, err := readCPUs(fsys, []int{0, 1})
	if err == nil || !strings.Contains(err.Error(), "cpu1/topology/core_id") {
		t.Fatalf("err = %v, want one naming the bad file", err)
	}
}

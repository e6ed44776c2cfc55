package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in      string
		want    Shard
		wantErr string
	}{
		{"0/4", Shard{Index: 0, Count: 4}, ""},
		{" 3 / 4 ", Shard{Index: 3, Count: 4}, ""},
		{"4/4", Shard{}, "want 0 ≤ I < N"},
		{"-1/4", Shard{}, "want 0 ≤ I < N"},
		{"0/0", Shard{}, "want 0 ≤ I < N"},
		{"1", Shard{}, "want I/N"},
		{"a/b", Shard{}, "want I/N"},
	}
	for _, tc := range tests {
		got, err := ParseShard(tc.in)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, error with %q", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestShardsPartitionTheRuns checks that the shards of a source hold every
// run exactly once, that Size counts them, and that IDs and indices do not
// depend on the shard.
func TestShardsPartitionTheRuns(t *testing.T) {
	sweep, err := parseHydra([]string{"prog", "a=range(7)", "b=x,y"})
	if err != nil {
		t.Fatal(err)
	}
	all := collect(t, sweep, expandOptions{Reps: 2})
	for _, count := range []int{1, 2, 3, 5, 28, 40} {
		var union []run.Run
		for i := range count {
			sh := Shard{Index: i, Count: count}
			runs := collect(t, sweep, expandOptions{Reps: 2, Shard: sh})
			if len(runs) != sh.Size(len(all)) {
				t.Errorf("shard %v: %d runs, Size says %d", sh, len(runs), sh.Size(len(all)))
			}
			for _, r := range runs {
				if r.Index%count != i {
					t.Errorf("shard %v holds run %d", sh, r.Index)
				}
			}
			union = append(union, runs...)
		}
		slices.SortFunc(union, func(a, b run.Run) int { return a.Index - b.Index })
		if !slices.EqualFunc(union, all, func(a, b run.Run) bool { return a.ID == b.ID && a.Index == b.Index && slices.Equal(a.Args, b.Args) }) {
			t.Errorf("%d shards together are not the %d runs once each", count, len(all))
		}
	}
}

func collect(t *testing.T, s *hydraSweep, opts expandOptions) []run.Run {
	t.Helper()
	seq, err := s.Runs(opts)
	if err != nil {
		t.Fatal(err)
	}
	var runs []run.Run
	for r, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

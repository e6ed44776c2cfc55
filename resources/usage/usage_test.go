package usage

import "testing"

func TestSettler(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		description string
		samples     int
		curve       []uint64
		wantAt      int // index of the sample at which it settles; -1 never
		wantPeak    uint64
	}{
		{"nothing allocated yet never settles", 2, []uint64{0, 0, 0, 0, 0}, -1, 0},
		{"grows, then holds for two samples", 2, []uint64{0, gib, 4 * gib, 8 * gib, 8 * gib, 8 * gib}, 5, 8 * gib},
		{"growth within 1% counts as holding", 2, []uint64{8 * gib, 8*gib + gib/200, 8*gib + gib/100}, 2, 8*gib + gib/100},
		{"a second phase of growth starts the count again", 2, []uint64{gib, gib, 6 * gib, 6 * gib, 6 * gib}, 4, 6 * gib},
		{"dropping is holding", 1, []uint64{6 * gib, 2 * gib}, 1, 6 * gib},
		{"freed to zero starts again", 1, []uint64{gib, 0, gib, gib}, 3, gib},
		{"zero Samples settles at the first memory", 0, []uint64{0, gib}, 1, gib},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			s := Settler{Samples: tc.samples}
			at := -1
			for i, b := range tc.curve {
				if s.Add(b) && at < 0 {
					at = i
				}
			}
			if at != tc.wantAt || s.Peak() != tc.wantPeak {
				t.Errorf("settled at sample %d, peak %d; want %d, %d", at, s.Peak(), tc.wantAt, tc.wantPeak)
			}
		})
	}
}

func TestParseOOMKill(t *testing.T) {
	for _, tc := range []struct {
		description, file string
		want              uint64
		ok                bool
	}{
		{"cgroup v2 memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n", 1, true},
		{"cgroup v1 memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n", 4, true},
		{"an old kernel without the count", "low 0\nhigh 0\nmax 0\noom 0\n", 0, false},
		{"oom_group_kill is not oom_kill", "oom_group_kill 2\n", 0, false},
		{"damaged", "oom_kill x\n", 0, false},
	} {
		if n, ok := ParseOOMKill([]byte(tc.file)); n != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.description, n, ok, tc.want, tc.ok)
		}
	}
}

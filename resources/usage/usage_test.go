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

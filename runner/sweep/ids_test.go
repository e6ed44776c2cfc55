package sweep

import (
	"math/rand/v2"
	"testing"
)

// TestIDSetCounts checks the table against a map: every key counted as
// often as it was added, through growth, probing past taken slots and
// wrapping at the table's end.
func TestIDSetCounts(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		key     func(r *rand.Rand, i int) uint64
		reserve int
	}{
		{"random 48-bit keys", func(r *rand.Rand, i int) uint64 { return r.Uint64() >> 16 }, 0},
		{"keys that share their low bits, so every one probes", func(r *rand.Rand, i int) uint64 { return uint64(i) << 20 }, 0},
		{"keys at the top of the table wrap to its start", func(r *rand.Rand, i int) uint64 { return uint64(i)<<20 | 1023 }, 0},
		{"the zero key", func(r *rand.Rand, i int) uint64 { return 0 }, 0},
		{"room reserved, then outgrown", func(r *rand.Rand, i int) uint64 { return r.Uint64() >> 16 }, 1000},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var s idSet
			if tc.reserve > 0 {
				s.reserve(tc.reserve)
			}
			want := map[uint64]uint32{}
			var keys []uint64
			for i := range 5000 {
				k := tc.key(r, i)
				if i%7 == 3 && len(keys) > 0 {
					k = keys[r.IntN(len(keys))] // a repeat
				}
				keys = append(keys, k)
				want[k]++
				if got := s.add(k); got != want[k] {
					t.Fatalf("add #%d of %#x = %d, want %d", i, k, got, want[k])
				}
			}
			if s.used != len(want) {
				t.Errorf("%d slots used, want %d distinct keys", s.used, len(want))
			}
			if 4*s.used > 3*len(s.slots) {
				t.Errorf("%d of %d slots used: more than three quarters", s.used, len(s.slots))
			}
		})
	}
}

package sweep

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestMemoIDs: a walk after Scan reads every ID from the memo Scan kept,
// and they are the IDs hashing gives: repeats ("-2") and reps included,
// in every shard.
func TestMemoIDs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tasks.txt")
	if err := os.WriteFile(file, []byte("echo a\necho b\necho a\necho c\necho a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := func(scan bool, shard Shard) []string {
		src, err := Spec{TaskFile: file, Reps: 2}.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if scan {
			if err := src.Scan(nil); err != nil {
				t.Fatal(err)
			}
			if len(src.memo) != 10 {
				t.Fatalf("memo of %d runs after Scan, want 10", len(src.memo))
			}
		}
		var got []string
		for r, err := range src.Runs(shard) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.ID)
		}
		return got
	}
	for _, shard := range []Shard{{}, {Index: 1, Count: 3}} {
		hashed, memo := ids(false, shard), ids(true, shard)
		if !slices.Equal(hashed, memo) || len(hashed) == 0 {
			t.Errorf("shard %+v: IDs from the memo %q, hashed %q", shard, memo, hashed)
		}
	}
	if got := ids(true, Shard{}); got[4] != got[0]+"-2" || got[8] != got[0]+"-3" {
		t.Errorf("repeats: %q", got)
	}
}

// TestMemoEditedFile: a task file edited in place after Scan (the same
// size, so the walk reads the new bytes) is an error at the changed line,
// not a run whose ID names another command; the runs before it come.
func TestMemoEditedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tasks.txt")
	if err := os.WriteFile(file, []byte("echo a\necho b\necho c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Spec{TaskFile: file}.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Scan(nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("echo a\necho x\necho c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	var walkErr error
	for r, err := range src.Runs(Shard{}) {
		if err != nil {
			walkErr = err
			break
		}
		got = append(got, r.Args[len(r.Args)-1])
	}
	if !errors.Is(walkErr, ErrChanged) || !strings.Contains(walkErr.Error(), "tasks.txt:2") || !slices.Equal(got, []string{"echo a"}) {
		t.Errorf("runs %q, error %v; want run a, then ErrChanged at tasks.txt:2", got, walkErr)
	}
}

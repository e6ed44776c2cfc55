package sweep

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// idSet hands out content-derived run IDs and counts repeats. Its zero
// value is ready to use. It is not safe for concurrent use.
//
// A sweep of millions of runs is read through an idSet on every pass, so
// it is an open-addressing table of the IDs' 48-bit hashes (8 bytes a
// slot, at most half full) rather than a map: a tenth of a map's time per
// run at a million runs, and half its memory. Repeats are rare and kept
// in a map.
type idSet struct {
	slots   []uint64          // key+1, 0 for an empty slot; len is a power of two
	used    int               // slots taken
	repeats map[uint64]uint32 // keys handed out more than once: times
}

// next returns the ID of a run with this argv and nothing else.
func (s *idSet) next(args []string) string { return s.nextKey(args, nil, 0) }

// nextKey returns the ID of a run from its content: the first 12 hex digits
// of the SHA-256 of its argv, its added environment and its repetition, with
// "-k" appended for the k-th time (k ≥ 2) the same 12 digits are handed out.
//
// Each argv element is hashed followed by a NUL (which no element can
// contain); each env entry follows as 0x01, the entry, NUL; a rep > 0 as
// 0x02, its decimal digits, NUL. So a run with no added environment and rep
// 0 hashes exactly as its argv alone: task-file IDs are the same with or
// without --reps, and growing --reps keeps the IDs of the earlier reps.
func (s *idSet) nextKey(args, env []string, rep int) string {
	h := sha256.New()
	var buf []byte
	for _, a := range args {
		buf = append(append(buf[:0], a...), 0)
		h.Write(buf)
	}
	for _, kv := range env {
		buf = append(append(append(buf[:0], 1), kv...), 0)
		h.Write(buf)
	}
	if rep > 0 {
		buf = append(strconv.AppendInt(append(buf[:0], 2), int64(rep), 10), 0)
		h.Write(buf)
	}
	var sum [sha256.Size]byte
	short := h.Sum(sum[:0])[:6]
	id := hex.EncodeToString(short)
	key := binary.BigEndian.Uint64(append([]byte{0, 0}, short...))
	if n := s.add(key); n > 1 {
		id += "-" + strconv.FormatUint(uint64(n), 10)
	}
	return id
}

// add counts key once more and returns how many times it was added.
func (s *idSet) add(key uint64) uint32 {
	if 2*(s.used+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	// The key is part of a SHA-256: its low bits are as good as a hash.
	for i := key & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = key + 1
			s.used++
			return 1
		case key + 1:
			if s.repeats == nil {
				s.repeats = make(map[uint64]uint32)
			}
			n := s.repeats[key] + 1
			if n == 1 {
				n = 2
			}
			s.repeats[key] = n
			return n
		}
	}
}

// grow doubles the table (from 1024 slots) and places every key again.
func (s *idSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(2*len(old), 1024))
	mask := uint64(len(s.slots) - 1)
	for _, k := range old {
		if k == 0 {
			continue
		}
		i := (k - 1) & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = k
	}
}

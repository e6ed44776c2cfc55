package sweep

import (
	"crypto/sha256"
	"strconv"
)

// idSet hands out content-derived run IDs and counts repeats. Its zero
// value is ready to use. It is not safe for concurrent use.
//
// A sweep of millions of runs is read through an idSet on every pass, so
// it is an open-addressing table of the IDs' 48-bit hashes (8 bytes a
// slot, at most three quarters full: 134 MB for ten million runs) rather
// than a map: a fraction of a map's time per run at a million runs, and
// of its memory. Repeats are rare and kept in a map.
type idSet struct {
	slots   []uint64          // key+1, 0 for an empty slot; len is a power of two
	used    int               // slots taken
	repeats map[uint64]uint32 // keys handed out more than once: times
	msg     []byte            // the message hashed last, for its buffer
}

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
	key := s.key(args, env, rep)
	var id [12 + 1 + 10]byte
	for j := 11; j >= 0; j-- {
		id[j] = hexDigits[key>>(4*(11-j))&0xf]
	}
	if n := s.add(key); n > 1 {
		id[12] = '-'
		return string(strconv.AppendUint(id[:13], uint64(n), 10))
	}
	return string(id[:12])
}

const hexDigits = "0123456789abcdef"

// key is the 48 bits of a run's content that its ID writes in hex: the
// first six bytes of the SHA-256 of the message nextKey describes.
func (s *idSet) key(args, env []string, rep int) uint64 {
	// One buffer for the whole message, hashed at once: no allocation but
	// the ID's own, for runs that stream by the million.
	msg := s.msg[:0]
	for _, a := range args {
		msg = append(append(msg, a...), 0)
	}
	for _, kv := range env {
		msg = append(append(append(msg, 1), kv...), 0)
	}
	if rep > 0 {
		msg = append(strconv.AppendInt(append(msg, 2), int64(rep), 10), 0)
	}
	s.msg = msg
	sum := sha256.Sum256(msg)
	return uint64(sum[0])<<40 | uint64(sum[1])<<32 | uint64(sum[2])<<24 | uint64(sum[3])<<16 | uint64(sum[4])<<8 | uint64(sum[5])
}

// add counts key once more and returns how many times it was added.
func (s *idSet) add(key uint64) uint32 {
	if 4*(s.used+1) > 3*len(s.slots) {
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

// reserve makes room for n keys at once, up to a million: a table grown a
// key at a time to a million moves each key about twice. Beyond, the table
// grows as the keys come, so that a sweep of ten million runs does not
// hold the whole table at its first run.
func (s *idSet) reserve(n int) {
	size := 1024
	for 3*size < 4*min(n, 1<<20) {
		size *= 2
	}
	if size > len(s.slots) {
		s.resize(size)
	}
}

// grow doubles the table (from 1024 slots).
func (s *idSet) grow() { s.resize(max(2*len(s.slots), 1024)) }

// resize makes the table size slots, a power of two, and places every key
// again.
func (s *idSet) resize(size int) {
	old := s.slots
	s.slots = make([]uint64, size)
	mask := uint64(size - 1)
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

// idMemo keeps the ID of every run of a source, by index, as a walk
// handed them out: the 48-bit key and the repeat count of each, 8 bytes a
// run. A later walk of the same bytes reads its IDs from it instead of
// hashing every run again (a resume of a million runs walks its source
// twice: to check it, then to start what is left).
type idMemo []uint64

// maxMemoRuns bounds the runs a memo is kept for: 32 MB.
const maxMemoRuns = 4 << 20

// add appends the ID id; it reports false for an ID that is not one
// nextKey makes, which ends the memo.
func (m *idMemo) add(id string) bool {
	if len(id) < 12 || len(*m) >= maxMemoRuns {
		return false
	}
	var key uint64
	for i := range 12 {
		c := id[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			return false
		}
		key = key<<4 | uint64(c)
	}
	n := uint64(1)
	if len(id) > 12 {
		k, err := strconv.ParseUint(id[13:], 10, 16)
		if id[12] != '-' || err != nil || k < 2 {
			return false
		}
		n = k
	}
	*m = append(*m, key<<16|n)
	return true
}

// key returns the 48-bit content key of the run at index i.
func (m idMemo) key(i int) uint64 { return m[i] >> 16 }

// id returns the ID of the run at index i, as nextKey made it.
func (m idMemo) id(i int) string {
	v := m[i]
	key, n := v>>16, v&0xffff
	var b [12 + 1 + 5]byte
	for j := 11; j >= 0; j-- {
		b[j] = hexDigits[key&0xf]
		key >>= 4
	}
	if n < 2 {
		return string(b[:12])
	}
	b[12] = '-'
	return string(strconv.AppendUint(b[:13], n, 10))
}

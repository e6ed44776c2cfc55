package sweep

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is one of Count disjoint parts of a source's runs, for running one
// sweep as a scheduler array (one nodepack per node). Shard Index holds the
// runs whose Index ≡ Index (mod Count): run 0 goes to shard 0, run 1 to
// shard 1, and so on round-robin.
//
// Round-robin rather than contiguous blocks because a shard must be known
// while the source streams (a block needs the total first, and standard
// input has none), because appending runs to a source leaves every
// existing run in its shard (a block boundary would move), and because
// neighbouring runs — often the same configuration with another seed or
// rep — land on different nodes, which evens out their run times.
//
// The zero value, like any Count ≤ 1, is the whole source.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard parses "I/N" with 0 ≤ I < N.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	count, err2 := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want I/N, for example 0/4", s)
	}
	sh := Shard{Index: index, Count: count}
	if err := sh.check(); err != nil {
		return Shard{}, err
	}
	return sh, nil
}

func (s Shard) check() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard %d/%d: want 0 ≤ I < N", s.Index, s.Count)
	}
	return nil
}

// Contains reports whether the run at position index belongs to the shard.
func (s Shard) Contains(index int) bool {
	return s.Count <= 1 || index%s.Count == s.Index
}

// Size returns how many of total runs (positions 0 … total-1) the shard
// holds.
func (s Shard) Size(total int) int {
	if s.Count <= 1 {
		return total
	}
	if total <= s.Index {
		return 0
	}
	return (total-s.Index-1)/s.Count + 1
}

// String returns "I/N".
func (s Shard) String() string {
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(max(s.Count, 1))
}

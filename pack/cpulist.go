package pack

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// maxCPUID bounds the CPU ids ParseCPUList accepts. Linux builds with at
// most 8192 CPUs; the bound keeps a typo like "0-99999999" from expanding
// into a huge slice.
const maxCPUID = 1<<16 - 1

// FormatCPUList returns cpus as a compact list in the Linux cpulist format,
// ascending, with runs of two or more consecutive ids as ranges:
// "0-31,64-95". cpus need not be sorted, and an id listed twice appears
// once. An empty list gives "".
func FormatCPUList(cpus []int) string {
	sorted := slices.Clone(cpus)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var b strings.Builder
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sorted[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sorted[j]))
		}
		i = j + 1
	}
	return b.String()
}

// ParseCPUList parses a Linux cpulist such as "0-3,8,10-11" (the format of
// cpuset files, Slurm and taskset -c) and returns the ids ascending.
//
// Entries are ids or ranges lo-hi with lo <= hi, separated by commas, in
// any order; spaces around entries and around the whole list are ignored,
// so a line read from a file parses. An empty list gives an empty (nil)
// slice. Rejected, with an error naming the entry: anything but digits and
// one '-' (so negative ids and the kernel's ":stride" syntax), descending
// ranges, ids above 65535, and an id listed twice, which in a CPU list is
// almost always a typo.
func ParseCPUList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var seen [(maxCPUID + 1) / 64]uint64
	n := 0
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		lo, hi, why, ok := parseCPURange(entry)
		if !ok && why == "" {
			return nil, fmt.Errorf("cpu list %q: bad entry %q", s, entry)
		}
		if !ok {
			return nil, fmt.Errorf("cpu list %q: bad entry %q: %s", s, entry, why)
		}
		for id := lo; id <= hi; id++ {
			if seen[id/64]&(1<<(id%64)) != 0 {
				return nil, fmt.Errorf("cpu list %q: cpu %d listed twice", s, id)
			}
			seen[id/64] |= 1 << (id % 64)
			n++
		}
	}
	cpus := make([]int, 0, n)
	for w, word := range seen {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			cpus = append(cpus, w*64+b)
			word &^= 1 << b
		}
	}
	return cpus, nil
}

// parseCPURange parses "n" or "lo-hi". When it fails, why is empty for a
// syntax error and otherwise says what is wrong.
func parseCPURange(entry string) (lo, hi int, why string, ok bool) {
	first, last, isRange := strings.Cut(entry, "-")
	if lo, why, ok = parseCPUID(first); !ok {
		return 0, 0, why, false
	}
	if !isRange {
		return lo, lo, "", true
	}
	if hi, why, ok = parseCPUID(last); !ok {
		return 0, 0, why, false
	}
	if hi < lo {
		return 0, 0, "descending range", false
	}
	return lo, hi, "", true
}

func parseCPUID(s string) (id int, why string, ok bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, "", false
	}
	id, err := strconv.Atoi(s)
	if err != nil || id > maxCPUID {
		return 0, "cpu above " + strconv.Itoa(maxCPUID), false
	}
	return id, "", true
}

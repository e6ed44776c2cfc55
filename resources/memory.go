package resources

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// unlimited is where cgroup v1 reports "no limit" (a page-aligned
// LONG_MAX); anything at or above it means no limit.
const unlimited = 1 << 62

// cgroupMemoryLimit returns the tightest memory limit on this process's
// cgroup or any of its ancestors (Slurm limits the job, the step sits
// below it), from cgroup v2 memory.max or v1 memory.limit_in_bytes. Zero
// means no limit was found.
func cgroupMemoryLimit(root fs.FS) uint64 {
	data, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return 0
	}
	var limit uint64
	tighten := func(v uint64) {
		if v > 0 && v < unlimited && (limit == 0 || v < limit) {
			limit = v
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// hierarchy-id:controllers:path
		fields := strings.SplitN(sc.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		switch {
		case fields[0] == "0" && fields[1] == "":
			for _, mount := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
				tighten(walkUpLimit(root, mount, fields[2], "memory.max"))
			}
		case hasController(fields[1], "memory"):
			tighten(walkUpLimit(root, "sys/fs/cgroup/memory", fields[2], "memory.limit_in_bytes"))
		}
	}
	return limit
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// walkUpLimit returns the smallest value of file in dir and its ancestors
// up to the mount point; zero when none is set.
func walkUpLimit(root fs.FS, mount, dir, file string) uint64 {
	var limit uint64
	for d := path.Clean("/" + dir); ; d = path.Dir(d) {
		b, err := fs.ReadFile(root, path.Join(mount, d, file))
		if err == nil {
			s := strings.TrimSpace(string(b))
			if v, err := strconv.ParseUint(s, 10, 64); err == nil && v < unlimited && (limit == 0 || v < limit) {
				limit = v
			}
		}
		if d == "/" {
			return limit
		}
	}
}

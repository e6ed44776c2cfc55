//go:build linux

package claim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// MountCache reads the caches of the file system that holds dir, from
// /proc/self/mountinfo: the mount whose mount point is the longest prefix
// of dir's real path.
func MountCache(dir string) (Cache, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Cache{}, fmt.Errorf("claim: the output directory's mount: %w", err)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Cache{}, fmt.Errorf("claim: the output directory's mount: %w", err)
	}
	defer f.Close()
	best, c := -1, Cache{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		point, fstype, opts, ok := parseMountinfo(sc.Text())
		if !ok || !under(real, point) || len(point) <= best {
			continue
		}
		best, c = len(point), CacheOf(fstype, opts)
	}
	return c, sc.Err()
}

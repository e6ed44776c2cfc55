package resources

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
)

const cpuDir = "sys/devices/system/cpu"

// readCPUs returns the topology of the allowed CPUs, read from the sysfs
// under root: core and package from cpuN/topology, NUMA node from
// node/nodeN/cpulist. CPUs that sysfs lists as offline are dropped with a
// warning. Without topology files (some containers, non-Linux) each CPU
// counts as its own core on socket 0, also with a warning.
func readCPUs(root fs.FS, allowed []int) ([]CPU, []string, error) {
	var warnings []string
	allowed = slices.Clone(allowed)
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)

	if online, err := readList(root, path.Join(cpuDir, "online")); err == nil {
		var offline []int
		allowed = slices.DeleteFunc(allowed, func(id int) bool {
			if slices.Contains(online, id) {
				return false
			}
			offline = append(offline, id)
			return true
		})
		if len(offline) > 0 {
			warnings = append(warnings, fmt.Sprintf("cpus %s are allowed but offline: skipped", pack.FormatCPUList(offline)))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}

	numaOf, err := readNUMANodes(root)
	if err != nil {
		return nil, nil, err
	}

	cpus := make([]CPU, 0, len(allowed))
	missingTopology := false
	for _, id := range allowed {
		c := CPU{ID: id, Core: id, Socket: 0, NUMA: -1}
		if n, ok := numaOf[id]; ok {
			c.NUMA = n
		}
		dir := path.Join(cpuDir, "cpu"+strconv.Itoa(id), "topology")
		core, errCore := readInt(root, path.Join(dir, "core_id"))
		socket, errSocket := readInt(root, path.Join(dir, "physical_package_id"))
		switch {
		case errCore == nil && errSocket == nil:
			c.Core = core
			c.Socket = max(socket, 0) // -1 on some virtual machines
		case errors.Is(errCore, fs.ErrNotExist) || errors.Is(errSocket, fs.ErrNotExist):
			missingTopology = true
		default:
			return nil, nil, errors.Join(errCore, errSocket)
		}
		cpus = append(cpus, c)
	}
	if missingTopology {
		warnings = append(warnings, "sysfs has no cpu topology for some cpus: each counts as its own core on socket 0")
	}
	return cpus, warnings, nil
}

// readNUMANodes maps each CPU to its NUMA node. A machine without
// sys/devices/system/node (NUMA off in the kernel) gives an empty map.
func readNUMANodes(root fs.FS) (map[int]int, error) {
	entries, err := fs.ReadDir(root, "sys/devices/system/node")
	if errors.Is(err, fs.ErrNotExist) {
		return map[int]int{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("numa nodes: %w", err)
	}
	numaOf := make(map[int]int)
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "node")
		node, err := strconv.Atoi(name)
		if !ok || err != nil {
			continue
		}
		cpus, err := readList(root, path.Join("sys/devices/system/node", e.Name(), "cpulist"))
		if err != nil {
			return nil, err
		}
		for _, c := range cpus {
			numaOf[c] = node
		}
	}
	return numaOf, nil
}

// readList reads a kernel cpu list file such as "0-3,8-11\n".
func readList(root fs.FS, name string) ([]int, error) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return nil, fmt.Errorf("read /%s: %w", name, err)
	}
	list, err := pack.ParseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("/%s: %w", name, err)
	}
	return list, nil
}

// readInt reads a file holding one decimal integer.
func readInt(root fs.FS, name string) (int, error) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, fmt.Errorf("read /%s: %w", name, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("/%s: %w", name, err)
	}
	return v, nil
}

// possibleCPUs returns how many CPU ids the kernel may ever use (the size
// of an affinity mask), from cpu/possible; 1024 when unknown.
func possibleCPUs(root fs.FS) int {
	list, err := readList(root, path.Join(cpuDir, "possible"))
	if err != nil || len(list) == 0 {
		return 1024
	}
	return slices.Max(list) + 1
}

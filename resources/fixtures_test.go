package resources

import (
	"fmt"
	"testing/fstest"
)

// machine describes a fixture node in the shape Linux numbers CPUs: the
// first hyperthread of every core first (socket by socket), then the
// second ones. Its tree() is the sysfs (and procfs) such a node shows.
type machine struct {
	sockets, coresPerSocket, threadsPerCore int
	numaPerSocket                           int    // 0: no node/ directory
	online                                  string // "" means every CPU
	extra                                   map[string]string
}

func (m machine) numCPUs() int { return m.sockets * m.coresPerSocket * m.threadsPerCore }

// cpu returns the id, core, socket and NUMA node of the CPU with the
// given thread, socket and core.
func (m machine) cpu(thread, socket, core int) CPU {
	id := thread*m.sockets*m.coresPerSocket + socket*m.coresPerSocket + core
	numa := -1
	if m.numaPerSocket > 0 {
		numa = socket*m.numaPerSocket + core/(m.coresPerSocket/m.numaPerSocket)
	}
	return CPU{ID: id, Core: core, Socket: socket, NUMA: numa}
}

func (m machine) tree() fstest.MapFS {
	fsys := fstest.MapFS{}
	put := func(name, data string) { fsys[name] = &fstest.MapFile{Data: []byte(data)} }
	n := m.numCPUs()
	put(cpuDir+"/possible", fmt.Sprintf("0-%d\n", n-1))
	if m.online == "" {
		put(cpuDir+"/online", fmt.Sprintf("0-%d\n", n-1))
	} else {
		put(cpuDir+"/online", m.online+"\n")
	}
	numaCPUs := map[int][]int{}
	for t := range m.threadsPerCore {
		for s := range m.sockets {
			for c := range m.coresPerSocket {
				cpu := m.cpu(t, s, c)
				dir := fmt.Sprintf("%s/cpu%d/topology/", cpuDir, cpu.ID)
				put(dir+"core_id", fmt.Sprintf("%d\n", cpu.Core))
				put(dir+"physical_package_id", fmt.Sprintf("%d\n", cpu.Socket))
				if cpu.NUMA >= 0 {
					numaCPUs[cpu.NUMA] = append(numaCPUs[cpu.NUMA], cpu.ID)
				}
			}
		}
	}
	for node, cpus := range numaCPUs {
		put(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", node), listOf(cpus)+"\n")
	}
	for name, data := range m.extra {
		put(name, data)
	}
	return fsys
}

// listOf formats ids the way sysfs does, without relying on the code under test.
func listOf(ids []int) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(id)
	}
	return s
}

// Fixture nodes.
var (
	// dualSocketHT: 2 sockets × 4 cores × 2 threads; one NUMA node per
	// socket; CPU i and i+8 are siblings; core ids 0-3 repeat per socket.
	dualSocketHT = machine{sockets: 2, coresPerSocket: 4, threadsPerCore: 2, numaPerSocket: 1}
	// fourNUMA: 2 sockets × 8 cores, no SMT, two NUMA nodes per socket
	// (sub-NUMA clustering).
	fourNUMA = machine{sockets: 2, coresPerSocket: 8, threadsPerCore: 1, numaPerSocket: 2}
	// offlineCPUs: dualSocketHT with CPUs 6 and 14 taken offline.
	offlineCPUs = machine{sockets: 2, coresPerSocket: 4, threadsPerCore: 2, numaPerSocket: 1, online: "0-5,7-13,15"}
	// dgxA100 is shaped like a DGX A100: 2 sockets × 64 cores × 2 threads,
	// 4 NUMA nodes per socket, NUMA node n holds CPUs 16n..16n+15 and
	// 128+16n..128+16n+15.
	dgxA100 = machine{sockets: 2, coresPerSocket: 64, threadsPerCore: 2, numaPerSocket: 4}
)

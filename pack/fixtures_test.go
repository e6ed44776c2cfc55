package pack

import (
	"fmt"
	"slices"
	"strings"
)

// Fixture topologies, in the style of kubelet's cpumanager tests. CPUs are
// numbered as Linux numbers them on x86 (see cpusSMT).

// topoDGXA100 is shaped like a DGX A100 in NPS4 mode: 2 sockets of 64 cores,
// 8 NUMA nodes of 16 cores, SMT, so NUMA node n has CPUs 16n..16n+15 and
// 128+16n..128+16n+15 (CPU i and i+128 are siblings). One A100 per NUMA node
// with LocalCPUs set; as on the real machine, GPU order is not NUMA order.
var topoDGXA100 = Topology{
	CPUs: cpusSMT(2, 4, 16, 2),
	GPUs: wholeGPUs("dgx", cpusSMT(2, 4, 16, 2), dgxGPUNUMA...),
}

// dgxGPUNUMA is the NUMA node of each GPU of topoDGXA100.
var dgxGPUNUMA = []int{3, 2, 1, 0, 7, 6, 5, 4}

// topoFourGPU is a common 2-socket server: 2 × 16 cores with SMT (CPU i and
// i+32 are siblings), one NUMA node per socket, GPUs 0-1 on socket 0 and
// GPUs 2-3 on socket 1.
var topoFourGPU = Topology{
	CPUs: cpusSMT(2, 1, 16, 2),
	GPUs: wholeGPUs("four", cpusSMT(2, 1, 16, 2), 0, 0, 1, 1),
}

// topoCPUOnly is a 2-socket node without GPUs: 2 × 8 cores with SMT (CPU i
// and i+16 are siblings), one NUMA node per socket.
var topoCPUOnly = Topology{CPUs: cpusSMT(2, 1, 8, 2)}

// topoSlurmCpuset is one socket of 8 cores with SMT (CPU i and i+8 are
// siblings) that Slurm restricted to CPUs 2,3,7,9-12: cores 2 and 3 keep both
// threads ({2,10}, {3,11}); cores 1, 4 and 7 keep one ({9}, {12}, {7}). The
// GPU's LocalCPUs name CPUs outside the cpuset, as NVML reports them.
var topoSlurmCpuset = Topology{
	CPUs: restrict(cpusSMT(1, 1, 8, 2), 2, 3, 7, 9, 10, 11, 12),
	GPUs: []GPU{{Index: 0, UUID: "GPU-slurm-0", NUMA: 0, LocalCPUs: ids(0, 15)}},
}

// topoMIG is topoFourGPU's CPUs with two A100s, each split into seven
// 1g.10gb MIG devices: GPU 0 on NUMA node 0, GPU 1 on NUMA node 1.
var topoMIG = Topology{
	CPUs: cpusSMT(2, 1, 16, 2),
	GPUs: migGPUs("mig", cpusSMT(2, 1, 16, 2), 7, 0, 1),
}

// withGPUMemory returns t with every GPU given bytes of memory.
func withGPUMemory(t Topology, bytes uint64) Topology {
	t.GPUs = slices.Clone(t.GPUs)
	for i := range t.GPUs {
		t.GPUs[i].MemoryBytes = bytes
	}
	return t
}

// cpusSMT returns the CPUs of sockets × numaPerSocket × coresPerNUMA cores
// with threads hyperthreads each. Cores are numbered socket by socket and
// NUMA node by NUMA node; thread t of core c is CPU t*cores+c. Core ids
// restart on each socket, as the kernel reports them.
func cpusSMT(sockets, numaPerSocket, coresPerNUMA, threads int) []CPU {
	cores := sockets * numaPerSocket * coresPerNUMA
	coresPerSocket := numaPerSocket * coresPerNUMA
	var cpus []CPU
	for t := range threads {
		for c := range cores {
			cpus = append(cpus, CPU{ID: t*cores + c, Core: c % coresPerSocket, Socket: c / coresPerSocket, NUMA: c / coresPerNUMA})
		}
	}
	return cpus
}

// restrict keeps the CPUs with the given ids, as a cpuset does.
func restrict(cpus []CPU, keep ...int) []CPU {
	return slices.DeleteFunc(slices.Clone(cpus), func(c CPU) bool { return !slices.Contains(keep, c.ID) })
}

// numaCPUs returns the ids of the CPUs on NUMA node numa, ascending.
func numaCPUs(cpus []CPU, numa int) []int {
	var out []int
	for _, c := range cpus {
		if c.NUMA == numa {
			out = append(out, c.ID)
		}
	}
	slices.Sort(out)
	return out
}

// ids returns lo..hi.
func ids(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// wholeGPUs returns GPU i on NUMA node numa[i], with its node's CPUs as
// LocalCPUs.
func wholeGPUs(name string, cpus []CPU, numa ...int) []GPU {
	var gpus []GPU
	for i, n := range numa {
		gpus = append(gpus, GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), NUMA: n, LocalCPUs: numaCPUs(cpus, n)})
	}
	return gpus
}

// migGPUs returns perGPU MIG devices of each GPU i on NUMA node numa[i].
func migGPUs(name string, cpus []CPU, perGPU int, numa ...int) []GPU {
	var gpus []GPU
	for i, n := range numa {
		for j := range perGPU {
			gpus = append(gpus, GPU{
				Index: i, UUID: fmt.Sprintf("MIG-%s-%d-%d", name, i, j), NUMA: n, LocalCPUs: numaCPUs(cpus, n),
				MIG: true, Parent: fmt.Sprintf("GPU-%s-%d", name, i),
			})
		}
	}
	return gpus
}

// describe renders an assignment for table tests: "GPU-a,GPU-b | 0-7,32-39 |
// numa 0", with "-" for no GPUs and a trailing " shared-gpu" or
// " shared-cpu".
func describe(as Assignment) string {
	var uuids []string
	for _, g := range as.GPUs {
		uuids = append(uuids, g.UUID)
	}
	if len(uuids) == 0 {
		uuids = []string{"-"}
	}
	s := fmt.Sprintf("%s | %s | numa %d", strings.Join(uuids, ","), FormatCPUList(as.CPUs), as.NUMA)
	if as.SharedGPUs {
		s += " shared-gpu"
	}
	if as.SharedCPUs {
		s += " shared-cpu"
	}
	return s
}

// topoCPU returns the CPU with the given id.
func topoCPU(t Topology, id int) (CPU, bool) {
	i := slices.IndexFunc(t.CPUs, func(c CPU) bool { return c.ID == id })
	if i < 0 {
		return CPU{}, false
	}
	return t.CPUs[i], true
}

// splitCores returns the cores that cpus use only in part: cores (by socket
// and core id) with an allowed CPU of t outside cpus. Empty means cpus are
// whole cores.
func splitCores(t Topology, cpus []int) []string {
	type key struct{ socket, core int }
	in := map[key]int{}
	for _, id := range cpus {
		c, _ := topoCPU(t, id)
		in[key{c.Socket, c.Core}]++
	}
	all := map[key]int{}
	for _, c := range t.CPUs {
		all[key{c.Socket, c.Core}]++
	}
	var split []string
	for k, n := range in {
		if n != all[k] {
			split = append(split, fmt.Sprintf("socket %d core %d", k.socket, k.core))
		}
	}
	slices.Sort(split)
	return split
}

// nearCPUs returns the allowed CPUs near g as the package defines it: on its
// NUMA node when that node has allowed CPUs, else in its LocalCPUs, else
// all of them. It is written independently of the allocator's code.
func nearCPUs(t Topology, g GPU) map[int]bool {
	near := map[int]bool{}
	for _, c := range t.CPUs {
		if g.NUMA >= 0 && c.NUMA == g.NUMA {
			near[c.ID] = true
		}
	}
	if len(near) > 0 {
		return near
	}
	for _, id := range g.LocalCPUs {
		if _, ok := topoCPU(t, id); ok {
			near[id] = true
		}
	}
	if len(near) > 0 {
		return near
	}
	for _, c := range t.CPUs {
		near[c.ID] = true
	}
	return near
}

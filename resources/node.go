package resources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/batch"
)

// schema names the version of the inventory document.
const schema = "nodepack.node/v1"

// Where the GPU list came from (Node.GPUSource; Node.CPUSource may also
// be sourceFlag).
const (
	sourceNVML = "nvml" // detected through NVML
	sourceEnv  = "env"  // no driver: the entries of CUDA_VISIBLE_DEVICES, as opaque ids
	sourceFlag = "flag" // given by the user (--gpus)
	sourceNone = "none" // no GPUs
)

// Where the CPU list came from (Node.CPUSource).
const (
	sourceAffinity = "affinity" // this process's affinity mask: what the batch system bound it to, if anything
	sourceSlots    = "slots"    // that mask cut to the batch system's count of CPUs (Grid Engine's NSLOTS)
	// sourceFlag: given by the user (--cpus).
)

// Node is everything nodepack knows about the node it runs on (or plans
// for). It is plain data: JSON with the names below is a stable document,
// and a Node read back from it describes the same node.
type Node struct {
	Schema      string    `json:"schema"`
	Hostname    string    `json:"hostname"`
	CPUModel    string    `json:"cpu_model,omitempty"`
	CPUs        []CPU     `json:"cpus"` // allowed CPUs only, ascending by id
	GPUs        []GPU     `json:"gpus"` // in NVML index order
	GPUSource   string    `json:"gpu_source"`
	CPUSource   string    `json:"cpu_source,omitempty"`
	MemoryBytes uint64    `json:"memory_bytes"` // usable: the smallest of Memory's non-zero values
	Memory      Memory    `json:"memory"`
	Scheduler   batch.Job `json:"scheduler"`
	Warnings    []string  `json:"warnings,omitempty"`
}

// CPU is one logical CPU the process may run on. Core ids repeat across
// sockets: a physical core is the pair (Socket, Core).
type CPU struct {
	ID     int `json:"id"`
	Core   int `json:"core"`
	Socket int `json:"socket"`
	NUMA   int `json:"numa"` // -1 when unknown
}

// GPU is one physical GPU. When MIG mode is on, its MIG devices are the
// units runs get, and the GPU itself is not handed out.
type GPU struct {
	Index       int    `json:"index"` // NVML index in this process's view
	UUID        string `json:"uuid"`  // GPU-…; with GPUSource env or flag, the opaque id as given
	Name        string `json:"name,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	PCIBusID    string `json:"pci_bus_id,omitempty"` // as NVML prints it: 00000000:07:00.0
	NUMA        int    `json:"numa"`                 // nearest NUMA node; -1 when unknown
	CPUs        []int  `json:"cpus"`                 // allowed CPUs local to the GPU
	MIGEnabled  bool   `json:"mig_enabled,omitempty"`
	MIG         []MIG  `json:"mig,omitempty"`
}

// MIG is one MIG device of a GPU in MIG mode.
type MIG struct {
	UUID        string `json:"uuid"` // MIG-…
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
}

// Memory holds the memory limits that apply to the job, in bytes; zero
// means not known or not limited.
type Memory struct {
	TotalBytes       uint64 `json:"total_bytes"`                  // physical memory of the node
	AvailableBytes   uint64 `json:"available_bytes,omitempty"`    // MemAvailable when nodepack looked
	CgroupLimitBytes uint64 `json:"cgroup_limit_bytes,omitempty"` // memory.max (v2) or memory.limit_in_bytes (v1)
	SlurmBytes       uint64 `json:"slurm_bytes,omitempty"`        // SLURM_MEM_PER_NODE
}

// Budget returns the memory the runs' mem requests may add up to: the
// job's limit (cgroup or Slurm, the smaller) where one is set, else what
// was available when nodepack looked, else the node's total; zero when
// none is known.
func (m Memory) Budget() uint64 {
	var limit uint64
	for _, v := range []uint64{m.CgroupLimitBytes, m.SlurmBytes} {
		if v != 0 && (limit == 0 || v < limit) {
			limit = v
		}
	}
	switch {
	case limit != 0:
		return limit
	case m.AvailableBytes != 0:
		return m.AvailableBytes
	}
	return m.TotalBytes
}

// Usable returns the smallest non-zero limit, or zero when none is known.
func (m Memory) Usable() uint64 {
	var usable uint64
	for _, v := range []uint64{m.TotalBytes, m.CgroupLimitBytes, m.SlurmBytes} {
		if v != 0 && (usable == 0 || v < usable) {
			usable = v
		}
	}
	return usable
}

// Within checks that n, a node saved elsewhere perhaps, can be run on
// here, the node as this process sees it: every CPU of n must be one this
// process may use, and every GPU one it shows.
func (n Node) Within(here Node) error {
	allowed := make(map[int]bool, len(here.CPUs))
	for _, c := range here.CPUs {
		allowed[c.ID] = true
	}
	var foreign []int
	for _, c := range n.CPUs {
		if !allowed[c.ID] {
			foreign = append(foreign, c.ID)
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("CPUs %s are not among the CPUs this process may use here (%s)",
			pack.FormatCPUList(foreign), pack.FormatCPUList(here.CPUIDs()))
	}
	gpus := map[string]bool{}
	for _, g := range here.GPUs {
		gpus[g.UUID] = true
		for _, m := range g.MIG {
			gpus[m.UUID] = true
		}
	}
	for _, g := range n.GPUs {
		if !gpus[g.UUID] {
			return fmt.Errorf("GPU %d (%s) is not on this node, which shows %d GPUs", g.Index, g.UUID, len(here.GPUs))
		}
	}
	return nil
}

// CPUIDs returns the ids of the allowed CPUs, ascending.
func (n Node) CPUIDs() []int {
	ids := make([]int, len(n.CPUs))
	for i, c := range n.CPUs {
		ids[i] = c.ID
	}
	return ids
}

// Topology returns what the packer needs: the allowed CPUs, the
// schedulable GPU units with their memory, and the memory budget (see
// Memory.Budget). A GPU in MIG mode contributes its MIG devices, not
// itself.
func (n Node) Topology() pack.Topology {
	t := pack.Topology{CPUs: make([]pack.CPU, len(n.CPUs)), Memory: n.Memory.Budget()}
	for i, c := range n.CPUs {
		t.CPUs[i] = pack.CPU{ID: c.ID, Core: c.Core, Socket: c.Socket, NUMA: c.NUMA}
	}
	for _, g := range n.GPUs {
		if g.MIGEnabled {
			for _, m := range g.MIG {
				t.GPUs = append(t.GPUs, pack.GPU{Index: g.Index, UUID: m.UUID, NUMA: g.NUMA,
					LocalCPUs: slices.Clone(g.CPUs), MIG: true, Parent: g.UUID, MemoryBytes: m.MemoryBytes})
			}
			continue
		}
		t.GPUs = append(t.GPUs, pack.GPU{Index: g.Index, UUID: g.UUID, NUMA: g.NUMA, LocalCPUs: slices.Clone(g.CPUs),
			MemoryBytes: g.MemoryBytes})
	}
	return t
}

// normalize makes the document canonical, so that writing a Node, reading it
// back and writing it again gives the same bytes.
func (n *Node) normalize() {
	n.Schema = schema
	if n.CPUs == nil {
		n.CPUs = []CPU{}
	}
	if n.GPUs == nil {
		n.GPUs = []GPU{}
	}
	for i := range n.GPUs {
		if n.GPUs[i].CPUs == nil {
			n.GPUs[i].CPUs = []int{}
		}
	}
	if n.CPUSource == "" {
		n.CPUSource = sourceAffinity
	}
	if n.GPUSource == "" {
		n.GPUSource = sourceNone
	}
	if n.Scheduler.Kind == "" {
		n.Scheduler.Kind = "none"
	}
	n.MemoryBytes = n.Memory.Usable()
}

// WriteJSON writes n as an indented JSON document followed by a newline.
func (n Node) WriteJSON(w io.Writer) error {
	n.normalize()
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadInventory reads a document written by [Node.WriteJSON] (nodepack
// detect --json) from the named file. Errors name the file and, for
// malformed JSON, the line and column.
func ReadInventory(name string) (Node, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return Node{}, fmt.Errorf("inventory: %w", err)
	}
	return parseInventory(data, name)
}

// parseInventory parses an inventory document; name is used in errors only.
func parseInventory(data []byte, name string) (Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var n Node
	if err := dec.Decode(&n); err != nil {
		return Node{}, positionError(data, name, err)
	}
	if dec.More() {
		return Node{}, fmt.Errorf("%s: trailing data after the inventory document", name)
	}
	if n.Schema != schema {
		return Node{}, fmt.Errorf("%s: schema %q, want %q", name, n.Schema, schema)
	}
	if err := n.validate(); err != nil {
		return Node{}, fmt.Errorf("%s: %w", name, err)
	}
	n.normalize()
	return n, nil
}

// positionError prefixes a JSON decoding error with "file:line:col".
func positionError(data []byte, name string, err error) error {
	var offset int64 = -1
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset
	case errors.As(err, &typeErr):
		offset = typeErr.Offset
	}
	if offset < 0 {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Offset counts the bytes read, the offending one included.
	offset = max(min(offset-1, int64(len(data))), 0)
	before := data[:offset]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("%s:%d:%d: %w", name, line, col, err)
}

// validate checks what the packer relies on: unique non-negative CPU ids,
// unique GPU ids, and GPU CPUs among the node's CPUs.
func (n Node) validate() error {
	seen := make(map[int]bool, len(n.CPUs))
	for _, c := range n.CPUs {
		if c.ID < 0 || c.Core < 0 || c.Socket < 0 || c.NUMA < -1 {
			return fmt.Errorf("cpu %d: negative id", c.ID)
		}
		if seen[c.ID] {
			return fmt.Errorf("cpu %d listed twice", c.ID)
		}
		seen[c.ID] = true
	}
	uuids := make(map[string]bool)
	for _, g := range n.GPUs {
		ids := []string{g.UUID}
		for _, m := range g.MIG {
			ids = append(ids, m.UUID)
		}
		for _, id := range ids {
			if strings.TrimSpace(id) == "" {
				return fmt.Errorf("gpu %d: empty uuid", g.Index)
			}
			if uuids[id] {
				return fmt.Errorf("gpu %s listed twice", id)
			}
			uuids[id] = true
		}
		if g.MIGEnabled && len(g.MIG) == 0 {
			// Legal (MIG on, no instances created) but nothing to run on.
			continue
		}
		for _, c := range g.CPUs {
			if !seen[c] {
				return fmt.Errorf("gpu %d: cpu %d is not among the node's cpus", g.Index, c)
			}
		}
	}
	return nil
}

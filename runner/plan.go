package runner

import "github.com/nodepack/nodepack/pack"

// PlanSchema names the plan document's format. Fields are only ever added
// to it.
const PlanSchema = "nodepack.plan/v1"

// PlanDoc is a plan as a stable JSON document (nodepack plan --json, and
// the ledger's header).
type PlanDoc struct {
	Schema   string       `json:"schema"`
	Request  RequestDoc   `json:"request"`
	Slots    []SlotDoc    `json:"slots"`
	Idle     IdleDoc      `json:"idle"`
	Runs     *RunsPlanDoc `json:"runs,omitempty"` // with a source: its runs and shards
	Warnings []string     `json:"warnings,omitempty"`
}

// RequestDoc is what each slot asked for.
type RequestDoc struct {
	GPUs       int `json:"gpus"`
	RunsPerGPU int `json:"runs_per_gpu"`
	CPUs       int `json:"cpus"`
}

// GPURef names a GPU in a plan document.
type GPURef struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
}

// SlotDoc is one slot of a plan document.
type SlotDoc struct {
	Slot       int      `json:"slot"`
	GPUs       []GPURef `json:"gpus"`
	CPUs       []int    `json:"cpus"`
	NUMA       int      `json:"numa"`
	SharedGPUs bool     `json:"shared_gpus,omitempty"`
	SharedCPUs bool     `json:"shared_cpus,omitempty"`
}

// IdleDoc is what no slot uses.
type IdleDoc struct {
	GPUs []GPURef `json:"gpus"`
	CPUs []int    `json:"cpus"`
}

// RunsPlanDoc is how a sweep splits into array tasks (--runs-per-shard).
type RunsPlanDoc struct {
	Total        int    `json:"total"`
	RunsPerShard int    `json:"runs_per_shard,omitempty"`
	Shards       int    `json:"shards,omitempty"`
	SlurmArray   string `json:"slurm_array,omitempty"` // the value of sbatch --array
}

// PlanDocument returns p as a document.
func PlanDocument(p pack.Plan) PlanDoc {
	doc := PlanDoc{
		Schema:   PlanSchema,
		Request:  RequestDoc{GPUs: p.Request.GPUs, RunsPerGPU: max(p.Request.RunsPerGPU, 1), CPUs: p.Request.CPUs},
		Slots:    make([]SlotDoc, len(p.Slots)),
		Idle:     IdleDoc{GPUs: gpuRefs(p.IdleGPUs), CPUs: orEmpty(p.IdleCPUs)},
		Warnings: p.Warnings,
	}
	for i, s := range p.Slots {
		doc.Slots[i] = SlotDoc{Slot: s.Index, GPUs: gpuRefs(s.GPUs), CPUs: orEmpty(s.CPUs), NUMA: s.NUMA,
			SharedGPUs: s.SharedGPUs, SharedCPUs: s.SharedCPUs}
	}
	return doc
}

func gpuRefs(gpus []pack.GPU) []GPURef {
	refs := make([]GPURef, len(gpus))
	for i, g := range gpus {
		refs[i] = GPURef{Index: g.Index, UUID: g.UUID}
	}
	return refs
}

func orEmpty(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

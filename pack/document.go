package pack

// PlanSchema names the plan document's format. Fields are only ever added
// to it.
const PlanSchema = "nodepack.plan/v1"

// PlanDoc is a plan as a stable JSON document, with the field names of
// its schema (nodepack plan --json, and a ledger's header).
type PlanDoc struct {
	Schema   string     `json:"schema"`
	Request  RequestDoc `json:"request"`
	Slots    []SlotDoc  `json:"slots"`
	Idle     IdleDoc    `json:"idle"`
	Warnings []string   `json:"warnings,omitempty"`
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

// Doc returns the plan as a document.
func (p Plan) Doc() PlanDoc {
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

func gpuRefs(gpus []GPU) []GPURef {
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

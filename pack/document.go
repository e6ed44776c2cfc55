package pack

// planSchema names the plan document's format. Fields are only ever added
// to it.
const planSchema = "nodepack.plan/v1"

// PlanDoc is a plan as a stable JSON document, with the field names of
// its schema (nodepack plan --json, and a ledger's header).
type PlanDoc struct {
	Schema   string     `json:"schema"`
	Request  requestDoc `json:"request"`
	Slots    []slotDoc  `json:"slots"`
	Idle     idleDoc    `json:"idle"`
	Warnings []string   `json:"warnings,omitempty"`
}

// requestDoc is what each run asks for. GPUs counts a shared GPU as 1,
// with RunsPerGPU the most runs on one GPU in the plan; CPUs is 1 for runs
// that share CPUs (SharedCPUs).
type requestDoc struct {
	Text        string `json:"text"` // as ParseRequest reads it: "gpus=0.25 cpus=4"
	GPUs        int    `json:"gpus"`
	RunsPerGPU  int    `json:"runs_per_gpu"`
	GPUMemBytes uint64 `json:"gpu_mem_bytes,omitempty"`
	CPUs        int    `json:"cpus"`
	SharedCPUs  bool   `json:"shared_cpus,omitempty"`
	MemBytes    uint64 `json:"mem_bytes,omitempty"`
}

// gpuRef names a GPU in a plan document.
type gpuRef struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
}

// slotDoc is one slot of a plan document.
type slotDoc struct {
	Slot       int      `json:"slot"`
	GPUs       []gpuRef `json:"gpus"`
	CPUs       []int    `json:"cpus"`
	NUMA       int      `json:"numa"`
	SharedGPUs bool     `json:"shared_gpus,omitempty"`
	SharedCPUs bool     `json:"shared_cpus,omitempty"`
}

// idleDoc is what no slot uses.
type idleDoc struct {
	GPUs []gpuRef `json:"gpus"`
	CPUs []int    `json:"cpus"`
}

// Doc returns the plan as a document, its warnings worded with Options'
// fields (see [Note]).
func (p Plan) Doc() PlanDoc {
	doc := PlanDoc{
		Schema:  planSchema,
		Request: p.Request.doc(p.RunsPerGPU),
		Slots:   make([]slotDoc, len(p.Slots)),
		Idle:    idleDoc{GPUs: gpuRefs(p.IdleGPUs), CPUs: orEmpty(p.IdleCPUs)},
	}
	for _, w := range p.Warnings {
		doc.Warnings = append(doc.Warnings, w.String())
	}
	for i, s := range p.Slots {
		doc.Slots[i] = slotDoc{Slot: s.Index, GPUs: gpuRefs(s.GPUs), CPUs: orEmpty(s.CPUs), NUMA: s.NUMA,
			SharedGPUs: s.SharedGPUs, SharedCPUs: s.SharedCPUs}
	}
	return doc
}

func (r Request) doc(runsPerGPU int) requestDoc {
	d := requestDoc{Text: r.String(), GPUs: r.GPUs, RunsPerGPU: max(runsPerGPU, 1), GPUMemBytes: r.GPUMem,
		CPUs: max(r.CPUs, 1), SharedCPUs: r.CPUs == 0, MemBytes: r.Mem}
	if r.SharesGPU() {
		d.GPUs = 1
	}
	if !r.UsesGPU() {
		d.GPUs, d.RunsPerGPU = 0, 1
	}
	return d
}

func gpuRefs(gpus []GPU) []gpuRef {
	refs := make([]gpuRef, len(gpus))
	for i, g := range gpus {
		refs[i] = gpuRef{Index: g.Index, UUID: g.UUID}
	}
	return refs
}

func orEmpty(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

package execute

import (
	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
)

// watchFaults takes the GPUs that report a fault out of use, until the
// channel closes or the sweep has ended.
func (e *Execution) watchFaults(faults <-chan usage.GPUFault) {
	for {
		select {
		case f, ok := <-faults:
			if !ok {
				return
			}
			e.gpuOut(f)
		case <-e.done:
			return
		}
	}
}

// gpuOut takes the GPU of fault f (and its MIG devices) out of use for
// the rest of the sweep. Runs on it go on until they end; a failed one is
// gpu-error and is retried on another GPU. Waiting runs that the GPUs left
// can never serve end the sweep with an error, and with no GPU left no run
// starts at all.
func (e *Execution) gpuOut(f usage.GPUFault) {
	s := e.sched
	if s.alloc == nil {
		return
	}
	s.placing.Lock()
	retired, none := s.alloc.Retire(f.UUID)
	if retired && none {
		e.drain() // before the loop can find the node without GPUs
	}
	s.placing.Unlock()
	if !retired {
		return // not ours, or out already
	}
	s.mu.Lock()
	if s.faults == nil {
		s.faults = map[string]usage.GPUFault{}
	}
	s.faults[f.UUID] = f
	s.mu.Unlock()
	e.mu.Lock()
	e.sum.GPUsOut = append(e.sum.GPUsOut, f)
	e.sum.NoGPUsLeft = none
	e.mu.Unlock()
	if e.opts.OnGPUFault != nil {
		e.eventMu.Lock()
		e.opts.OnGPUFault(f, none)
		e.eventMu.Unlock()
	}
	s.signal()
}

// faulted reports whether a GPU of as (or the GPU a MIG device of it is
// part of) was taken out of use after a fault.
func (e *Execution) faulted(as pack.Assignment) bool {
	s := e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range as.GPUs {
		if _, ok := s.faults[g.UUID]; ok {
			return true
		}
		if _, ok := s.faults[g.Parent]; ok && g.Parent != "" {
			return true
		}
	}
	return false
}

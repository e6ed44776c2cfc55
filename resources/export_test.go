//go:build cgo && linux

package resources

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// UseNVML has detection, sampling and the fault watcher use lib (go-nvml's
// mock) in place of the system's NVML, for tests of code above this
// package; the function it returns puts the system's back.
func UseNVML(lib nvml.Interface) (restore func()) {
	old := newNVML
	newNVML = func() nvml.Interface { return lib }
	return func() { newNVML = old }
}

// MockDGX is go-nvml's DGX A100 mock with what it lacks filled in (see
// dgxServer): GPU i is local to CPUs 16i..16i+15 and 128+16i..128+16i+15,
// those of them the machine has.
func MockDGX() *dgxa100.Server { return dgxServer() }

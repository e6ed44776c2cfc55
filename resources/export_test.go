//go:build cgo && linux

package resources

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// UseNVML has detection, sampling and the fault watcher use lib (go-nvml's
// mock) in place of the system's NVML, for tests of code above this
// package; the function it returns puts the system's back.
func UseNVML(lib nvml.Interface) (restore func()) {
	old := newNVML
	newNVML = func() nvml.Interface { return lib }
	return func() { newNVML = old }
}

//go:build !(cgo && linux)

package resources

import (
	"context"
	"io/fs"

	"github.com/nodepack/nodepack/resources/usage"
)

// probeNVML reports no GPUs: NVML needs cgo on Linux, and this binary was
// built without it (CGO_ENABLED=0, a static build for old cluster images).
func probeNVML(fs.FS) ([]GPU, []string) {
	return nil, []string{"NVML not available: nodepack was built without cgo"}
}

// openGPUReader returns nil: no NVML, no GPU sampling.
func openGPUReader() gpuReader { return nil }

// WatchGPUFaults returns nil: without NVML no GPU reports a fault.
func WatchGPUFaults(context.Context, []string) <-chan usage.GPUFault { return nil }

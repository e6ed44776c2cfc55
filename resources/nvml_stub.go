//go:build !(cgo && linux)

package resources

import "io/fs"

// probeNVML reports no GPUs: NVML needs cgo on Linux, and this binary was
// built without it (CGO_ENABLED=0, a static build for old cluster images).
func probeNVML(fs.FS) ([]GPU, []string) {
	return nil, []string{"NVML not available: nodepack was built without cgo"}
}

// openGPUReader returns nil: no NVML, no GPU sampling.
func openGPUReader() gpuReader { return nil }

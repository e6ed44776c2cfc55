package failure

import "regexp"

// Builtin are the patterns every run's standard error is matched against,
// after the user's: the out-of-memory messages of the common frameworks
// and of the CUDA libraries, the messages of a GPU that faulted, and a
// full disk. Each names where its text comes from.
var Builtin = []Pattern{
	// PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp):
	// "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total
	// capacity of …", raised as torch.OutOfMemoryError (torch.cuda.
	// OutOfMemoryError before 2.5).
	builtin(CUDAOOM, `CUDA out of memory|torch(\.cuda)?\.OutOfMemoryError`, "PyTorch, c10/cuda/CUDACachingAllocator.cpp"),
	// The CUDA runtime's and driver's names and message for a failed
	// allocation (cudaErrorMemoryAllocation, "out of memory";
	// CUDA_ERROR_OUT_OF_MEMORY), as PyTorch's C10_CUDA_CHECK ("CUDA error:
	// out of memory") and TensorFlow's stream executor print them.
	builtin(CUDAOOM, `CUDA error: out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY`, "CUDA runtime and driver API error names"),
	// cuBLAS and cuDNN status codes for an allocation that failed.
	builtin(CUDAOOM, `CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED`, "cuBLAS and cuDNN status codes"),
	// TensorFlow's BFC allocator: "OOM when allocating tensor with
	// shape[…]", raised as ResourceExhaustedError.
	builtin(CUDAOOM, `OOM when allocating tensor`, "TensorFlow, core/common_runtime/bfc_allocator.cc"),
	// JAX/XLA's GPU allocator: "RESOURCE_EXHAUSTED: Out of memory while
	// trying to allocate N bytes", raised as XlaRuntimeError.
	builtin(CUDAOOM, `RESOURCE_EXHAUSTED: Out of memory`, "JAX/XLA, xla/tsl BFC allocator"),

	// CUDA runtime error strings of a faulted kernel or device:
	// cudaErrorIllegalAddress, cudaErrorAssert, cudaErrorLaunchFailure,
	// cudaErrorECCUncorrectable, and the driver's CUDA_ERROR_ILLEGAL_ADDRESS.
	builtin(GPUError, `an illegal memory access was encountered|device-side assert triggered|unspecified launch failure|uncorrectable ECC error encountered|CUDA_ERROR_ILLEGAL_ADDRESS`, "CUDA runtime error strings (cudaGetErrorString)"),
	// NCCL's failures as PyTorch reports them ("NCCL error in: …,
	// unhandled cuda error") and NCCL's own result names.
	builtin(GPUError, `NCCL error|ncclUnhandledCudaError|ncclInternalError`, "NCCL result codes, torch.distributed"),
	// The driver's message for a GPU that is gone.
	builtin(GPUError, `GPU has fallen off the bus|GPU is lost`, "NVIDIA driver and nvidia-smi"),

	// strerror(ENOSPC) in glibc and Python's "[Errno 28] No space left on
	// device"; Node and others print the errno name.
	builtin(DiskFull, `No space left on device|\bENOSPC\b`, "strerror(ENOSPC), errno name"),
}

func builtin(c Class, expr, source string) Pattern {
	return Pattern{Class: c, Regexp: regexp.MustCompile(expr), Source: source}
}

//go:build cuda || cudaemu

package cuda

import "unsafe"

// dptr is a device address.
type dptr uintptr

// kfunc is a loaded kernel: a CUfunction, or an emulator table index.
type kfunc uintptr

// deviceInfo describes the device a backend drives.
type deviceInfo struct {
	name         string // e.g. "NVIDIA H200"
	major, minor int    // compute capability
	totalMem     int64
}

// device is the driver-level seam under the backend: the CUDA driver
// (device_cu.go, build tag cuda) or the CPU emulator (device_emu.go, build
// tag cudaemu). Every method is called on the backend's engine goroutine,
// which is locked to its OS thread, the thread the CUDA context is current
// on.
//
// There are two streams: compute, where kernels, uploads and downloads run
// in order, and copy, for KV block transfers to and from pinned host
// memory, ordered against compute only through the explicit waits.
type device interface {
	info() deviceInfo
	kernel(module, name string) (kfunc, error)
	alloc(bytes int64) (dptr, error)
	free(p dptr) error
	// upload copies host memory to the device synchronously (weights).
	upload(dst dptr, src unsafe.Pointer, bytes int64) error
	// uploadAsync queues a copy on the compute stream; src is pageable
	// memory, which the driver stages before it returns.
	uploadAsync(dst dptr, src unsafe.Pointer, bytes int64) error
	// download queues a copy on the compute stream and waits for it.
	download(dst unsafe.Pointer, src dptr, bytes int64) error
	zeroAsync(dst dptr, bytes int64) error
	launch(f kfunc, grid, block [3]uint32, args []uint64) error
	// sync waits for the compute stream.
	sync() error
	memInfo() (free, total int64, err error)

	hostAlloc(bytes int64) (unsafe.Pointer, error) // page-locked
	hostFree(p unsafe.Pointer) error
	// copyWaitsCompute makes the copy stream wait for the work queued on
	// compute so far; computeWaitsCopy the reverse.
	copyWaitsCompute() error
	computeWaitsCopy() error
	copyOut(dst unsafe.Pointer, src dptr, bytes int64) error // copy stream, dst pinned
	copyIn(dst dptr, src unsafe.Pointer, bytes int64) error  // copy stream, src pinned
	syncCopy() error
	// fence records an event on the copy stream.
	fence() (fence, error)
	// timer records an event on the compute stream; elapsed gives the
	// milliseconds between two of them once both have completed.
	timer() (fence, error)
	elapsed(start, stop fence) (float64, error)

	// beginCapture starts recording the compute stream's launches into a
	// graph instead of running them; endCapture ends it and returns the
	// graph, ready to launch.
	beginCapture() error
	endCapture() (graph, error)

	close() error
}

// graph is an instantiated CUDA graph.
type graph interface {
	launch() error // on the compute stream
	destroy()
}

// fence is a recorded event.
type fence interface {
	query() (done bool, err error)
	wait() error
	destroy()
}

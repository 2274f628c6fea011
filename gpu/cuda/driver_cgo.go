//go:build cuda

package cuda

// The few driver calls gorgonia.org/cu does not make for us: the cuInit
// interposer, page-locked host memory, and a kernel launch without
// per-call allocations.

/*
#cgo LDFLAGS: -lcuda -ldl
#cgo CFLAGS: -Wno-deprecated-declarations
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <cuda.h>

// gorgonia.org/cu calls cuInit(0) in its package init and exits the
// process when it fails, before main or a test can fall back to the CPU.
// This definition of cuInit in the executable takes the place of the
// driver's for every caller in it (the static linker prefers it to the
// shared library's): it calls the driver's cuInit, found with
// dlsym(RTLD_NEXT), records the result for Available, and reports success
// so that cu's init returns. Available then refuses to use a device whose
// initialisation failed. Nothing else in the process depends on cuInit
// having succeeded: every later driver call fails cleanly with
// CUDA_ERROR_NOT_INITIALIZED.
static int zl_init_rc = -1; // -1: cuInit never called

CUresult CUDAAPI cuInit(unsigned int flags) {
	CUresult (*real)(unsigned int) = (CUresult (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
	zl_init_rc = real ? (int)real(flags) : -2;
	return CUDA_SUCCESS;
}

static int zl_init_result(void) { return zl_init_rc; }

static const char* zl_error_name(int r) {
	const char* s = NULL;
	if (cuGetErrorName((CUresult)r, &s) != CUDA_SUCCESS) return NULL;
	return s;
}

static const char* zl_error_string(int r) {
	const char* s = NULL;
	if (cuGetErrorString((CUresult)r, &s) != CUDA_SUCCESS) return NULL;
	return s;
}

static int zl_host_alloc(void** p, size_t n) {
	return (int)cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE);
}

// Graphs: capture of the compute stream (this thread's work only), and an
// executable graph made of it.
static int zl_begin_capture(uintptr_t s) {
	return (int)cuStreamBeginCapture((CUstream)s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

static int zl_end_capture(uintptr_t s, uintptr_t* exec) {
	CUgraph g = NULL;
	CUresult r = cuStreamEndCapture((CUstream)s, &g);
	if (r != CUDA_SUCCESS) return (int)r;
	CUgraphExec e = NULL;
	r = cuGraphInstantiateWithFlags(&e, g, 0);
	cuGraphDestroy(g);
	if (r != CUDA_SUCCESS) return (int)r;
	*exec = (uintptr_t)e;
	return 0;
}

static int zl_graph_launch(uintptr_t e, uintptr_t s) { return (int)cuGraphLaunch((CUgraphExec)e, (CUstream)s); }
static int zl_graph_destroy(uintptr_t e) { return (int)cuGraphExecDestroy((CUgraphExec)e); }

static int zl_launch(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     uintptr_t stream, uint64_t* args, int n) {
	void* params[32];
	for (int i = 0; i < n && i < 32; i++) params[i] = &args[i];
	return (int)cuLaunchKernel((CUfunction)f, gx, gy, gz, bx, by, bz, 0, (CUstream)stream, params, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cuResultName returns "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device
// is detected" for a driver result code.
func cuResultName(r int) string {
	name, msg := C.zl_error_name(C.int(r)), C.zl_error_string(C.int(r))
	// The stub libcuda of the toolkit knows no names (its cuInit returns
	// 34); name the results seen on machines without a working device.
	known := map[int]string{
		3:   "CUDA_ERROR_NOT_INITIALIZED",
		34:  "CUDA_ERROR_STUB_LIBRARY",
		35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
		100: "CUDA_ERROR_NO_DEVICE",
		999: "CUDA_ERROR_UNKNOWN",
	}
	s := known[r]
	if name != nil {
		s = C.GoString(name)
	}
	if s == "" {
		s = "CUresult"
	}
	s = fmt.Sprintf("%s (%d)", s, r)
	if msg != nil {
		s += ": " + C.GoString(msg)
	}
	return s
}

// initResult returns the result of the driver's cuInit(0), as recorded by
// the interposer: -1 if it was never called, -2 if libcuda has none.
func initResult() int { return int(C.zl_init_result()) }

// cuErr wraps a driver result.
func cuErr(r C.int, what string) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, cuResultName(int(r)))
}

func hostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := cuErr(C.zl_host_alloc(&p, C.size_t(n)), "cuMemHostAlloc"); err != nil {
		return nil, err
	}
	return p, nil
}

// launchArgs is C memory for kernel parameters, one per device.
type launchArgs struct{ p *C.uint64_t }

func newLaunchArgs() launchArgs { return launchArgs{(*C.uint64_t)(C.malloc(8 * 32))} }

func (a launchArgs) free() { C.free(unsafe.Pointer(a.p)) }

// launch calls cuLaunchKernel with args copied to C memory (Go memory may
// not be handed to C as an array of pointers).
func (a launchArgs) launch(f, stream uintptr, grid, block [3]uint32, args []uint64) error {
	if len(args) > 32 {
		return fmt.Errorf("%d kernel parameters; at most 32", len(args))
	}
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(a.p)), 32), args)
	r := C.zl_launch(C.uintptr_t(f), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), C.uintptr_t(stream), a.p, C.int(len(args)))
	return cuErr(r, "cuLaunchKernel")
}

func beginCapture(stream uintptr) error {
	return cuErr(C.zl_begin_capture(C.uintptr_t(stream)), "cuStreamBeginCapture")
}

// endCapture ends the capture and instantiates the graph.
func endCapture(stream uintptr) (uintptr, error) {
	var e C.uintptr_t
	if err := cuErr(C.zl_end_capture(C.uintptr_t(stream), &e), "cuStreamEndCapture/cuGraphInstantiate"); err != nil {
		return 0, err
	}
	return uintptr(e), nil
}

func graphLaunch(exec, stream uintptr) error {
	return cuErr(C.zl_graph_launch(C.uintptr_t(exec), C.uintptr_t(stream)), "cuGraphLaunch")
}

func graphDestroy(exec uintptr) { C.zl_graph_destroy(C.uintptr_t(exec)) }

//go:build cudaemu && !cuda

package cuda

/*
#cgo CXXFLAGS: -std=c++20 -O2 -ftls-model=initial-exec
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Emulated device memory is C heap memory; addresses cross as integers.
static uintptr_t zl_alloc(size_t n) { return (uintptr_t)aligned_alloc(256, (n + 255) & ~(size_t)255); }
static void zl_free(uintptr_t p) { free((void*)p); }
static void zl_to_dev(uintptr_t dst, const void* src, size_t n) { memcpy((void*)dst, src, n); }
static void zl_from_dev(void* dst, uintptr_t src, size_t n) { memcpy(dst, (const void*)src, n); }
static void zl_zero(uintptr_t dst, size_t n) { memset((void*)dst, 0, n); }

int zl_emu_kernel(const char* name, int* nargs);
int zl_emu_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, const uint64_t* args);
*/
import "C"

import (
	"embed"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// kernelSources is embedded only so that the go command, which does not
// follow #include, rebuilds emu.cc when a kernel source changes.
//
//go:embed kernels/*.cu kernels/*.cuh kernels/*.h
var kernelSources embed.FS

// driverName prefixes Backend.Name.
const driverName = "cudaemu"

// Available reports nil: the emulator needs no device.
func Available() error { return nil }

// emuDevice runs the kernels on the CPU (emu.cc). Memory is C heap memory
// standing in for device memory; both streams are the calling thread, so
// every operation completes before it returns.
type emuDevice struct {
	args *C.uint64_t // launch parameters, in C memory
	rec  *emuGraph   // the graph being captured, if any
}

// emuGraph is a captured list of launches.
type emuGraph struct {
	d        *emuDevice
	launches []emuLaunch
}

type emuLaunch struct {
	f           kfunc
	grid, block [3]uint32
	args        []uint64
}

func (g *emuGraph) launch() error {
	for _, l := range g.launches {
		if err := g.d.run(l.f, l.grid, l.block, l.args); err != nil {
			return err
		}
	}
	return nil
}

func (g *emuGraph) destroy() { g.launches = nil }

func (d *emuDevice) beginCapture() error {
	if d.rec != nil {
		return errors.New("capture already in progress")
	}
	d.rec = &emuGraph{d: d}
	return nil
}

func (d *emuDevice) endCapture() (graph, error) {
	g := d.rec
	if g == nil {
		return nil, errors.New("no capture in progress")
	}
	d.rec = nil
	return g, nil
}

func openDevice(ordinal int) (device, error) {
	if ordinal != 0 {
		return nil, &NoDeviceError{Reason: fmt.Sprintf("the emulator has device 0 only, not %d", ordinal)}
	}
	return &emuDevice{args: (*C.uint64_t)(C.malloc(8 * 32))}, nil
}

func (d *emuDevice) info() deviceInfo {
	return deviceInfo{name: "CPU emulator", major: 8, minor: 0, totalMem: 1 << 34}
}

func (d *emuDevice) kernel(module, name string) (kfunc, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var n C.int
	k := C.zl_emu_kernel(cs, &n)
	if k < 0 {
		return 0, fmt.Errorf("not in the emulator's table (emu.cc)")
	}
	return kfunc(k), nil
}

func (d *emuDevice) alloc(n int64) (dptr, error) {
	p := C.zl_alloc(C.size_t(n))
	if p == 0 {
		return 0, errors.New("out of host memory")
	}
	return dptr(p), nil
}

func (d *emuDevice) free(p dptr) error {
	C.zl_free(C.uintptr_t(p))
	return nil
}

func (d *emuDevice) upload(dst dptr, src unsafe.Pointer, n int64) error {
	C.zl_to_dev(C.uintptr_t(dst), src, C.size_t(n))
	return nil
}

func (d *emuDevice) uploadAsync(dst dptr, src unsafe.Pointer, n int64) error {
	return d.upload(dst, src, n)
}

func (d *emuDevice) download(dst unsafe.Pointer, src dptr, n int64) error {
	C.zl_from_dev(dst, C.uintptr_t(src), C.size_t(n))
	return nil
}

func (d *emuDevice) zeroAsync(dst dptr, n int64) error {
	C.zl_zero(C.uintptr_t(dst), C.size_t(n))
	return nil
}

func (d *emuDevice) launch(f kfunc, grid, block [3]uint32, args []uint64) error {
	if d.rec != nil {
		d.rec.launches = append(d.rec.launches, emuLaunch{f, grid, block, append([]uint64(nil), args...)})
		return nil
	}
	return d.run(f, grid, block, args)
}

func (d *emuDevice) run(f kfunc, grid, block [3]uint32, args []uint64) error {
	a := unsafe.Slice((*uint64)(unsafe.Pointer(d.args)), 32)
	copy(a, args)
	switch C.zl_emu_launch(C.int(f), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), d.args) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("bad launch geometry grid %v block %v", grid, block)
	default:
		return errors.New("deadlock: threads of a block wait at different barriers")
	}
}

func (d *emuDevice) sync() error { return nil }

func (d *emuDevice) memInfo() (free, total int64, err error) { return 1 << 33, 1 << 34, nil }

func (d *emuDevice) hostAlloc(n int64) (unsafe.Pointer, error) {
	p := C.malloc(C.size_t(n))
	if p == nil {
		return nil, errors.New("out of host memory")
	}
	return p, nil
}

func (d *emuDevice) hostFree(p unsafe.Pointer) error {
	C.free(p)
	return nil
}

func (d *emuDevice) copyWaitsCompute() error { return nil }
func (d *emuDevice) computeWaitsCopy() error { return nil }

func (d *emuDevice) copyOut(dst unsafe.Pointer, src dptr, n int64) error {
	return d.download(dst, src, n)
}

func (d *emuDevice) copyIn(dst dptr, src unsafe.Pointer, n int64) error {
	return d.upload(dst, src, n)
}

func (d *emuDevice) syncCopy() error { return nil }

// emuFence is an event that has always completed; it keeps the wall time
// it was recorded at for timers.
type emuFence struct{ at time.Time }

func (emuFence) query() (bool, error) { return true, nil }
func (emuFence) wait() error          { return nil }
func (emuFence) destroy()             {}

func (d *emuDevice) fence() (fence, error) { return emuFence{time.Now()}, nil }
func (d *emuDevice) timer() (fence, error) { return emuFence{time.Now()}, nil }
func (d *emuDevice) elapsed(start, stop fence) (float64, error) {
	return float64(stop.(emuFence).at.Sub(start.(emuFence).at)) / float64(time.Millisecond), nil
}

func (d *emuDevice) close() error {
	C.free(unsafe.Pointer(d.args))
	return nil
}

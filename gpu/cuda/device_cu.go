//go:build cuda

package cuda

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The kernels, compiled to PTX for compute_80 by `make kernels` (nvcc 11.8)
// and JIT-compiled by the driver for the device at load time.
//
//go:embed kernels/*.ptx
var ptx embed.FS

// driverName prefixes Backend.Name.
const driverName = "cuda"

// Available reports whether a CUDA device can be used: nil, or a
// *NoDeviceError saying why not ("no CUDA device (cuInit(0) =
// CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected)").
func Available() error {
	switch r := initResult(); r {
	case 0:
	case -1:
		return &NoDeviceError{Reason: "cuInit was not called"}
	case -2:
		return &NoDeviceError{Reason: "libcuda has no cuInit"}
	default:
		return &NoDeviceError{Reason: "cuInit(0) = " + cuResultName(r)}
	}
	n, err := cu.NumDevices()
	if err != nil {
		return &NoDeviceError{Reason: "cuDeviceGetCount: " + err.Error()}
	}
	if n == 0 {
		return &NoDeviceError{Reason: "the driver reports 0 devices"}
	}
	return nil
}

// cuDevice drives one GPU through gorgonia.org/cu, on the engine's thread.
type cuDevice struct {
	ordinal           int
	dev               cu.Device
	ctx               cu.CUContext
	compute, copy     cu.Stream
	computeEv, copyEv cu.Event // for waits between the streams
	mods              map[string]cu.Module
	args              launchArgs
	inf               deviceInfo
}

// openDevice retains the device's primary context (the one CUDA runtime
// libraries use too) and makes it current on the calling thread, creates
// the two streams and loads the kernel modules.
func openDevice(ordinal int) (_ device, err error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, err
	}
	if ordinal >= n {
		return nil, &NoDeviceError{Reason: fmt.Sprintf("device %d requested, the driver reports %d", ordinal, n)}
	}
	d := &cuDevice{ordinal: ordinal, mods: map[string]cu.Module{}}
	if d.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, err
	}
	if d.ctx, err = d.dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("cuDevicePrimaryCtxRetain: %w", err)
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if err = cu.SetCurrentContext(d.ctx); err != nil {
		return nil, err
	}
	if d.compute, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return nil, err
	}
	if d.copy, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return nil, err
	}
	if d.computeEv, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return nil, err
	}
	if d.copyEv, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return nil, err
	}
	d.args = newLaunchArgs()
	d.inf.name, _ = d.dev.Name()
	d.inf.major, d.inf.minor, _ = d.dev.ComputeCapability()
	d.inf.totalMem, _ = d.dev.TotalMem()
	for _, name := range kernelModules {
		src, err := ptx.ReadFile("kernels/" + name + ".ptx")
		if err != nil {
			return nil, err
		}
		log := &cu.JITErrorLogBuffer{Buffer: make([]byte, 16<<10)}
		mod, err := cu.LoadDataEx(string(src), log)
		if err != nil {
			msg := string(bytes.TrimRight(log.Buffer, "\x00"))
			return nil, fmt.Errorf("loading kernels/%s.ptx: %w: %s", name, err, msg)
		}
		d.mods[name] = mod
	}
	return d, nil
}

func (d *cuDevice) info() deviceInfo { return d.inf }

func (d *cuDevice) kernel(module, name string) (kfunc, error) {
	m, ok := d.mods[module]
	if !ok {
		return 0, fmt.Errorf("no module %s", module)
	}
	f, err := m.Function(name)
	if err != nil {
		return 0, err
	}
	return kfunc(*(*uintptr)(unsafe.Pointer(&f))), nil
}

// raw returns the driver handle inside a cu.Stream (a struct holding only
// the CUstream pointer).
func raw(s cu.Stream) uintptr { return *(*uintptr)(unsafe.Pointer(&s)) }

func (d *cuDevice) alloc(n int64) (dptr, error) {
	p, err := cu.MemAlloc(n)
	return dptr(p), err
}

// free waits for both streams first: memory may be freed while queued work
// still uses it.
func (d *cuDevice) free(p dptr) error {
	if err := d.compute.Synchronize(); err != nil {
		return err
	}
	if err := d.copy.Synchronize(); err != nil {
		return err
	}
	return cu.MemFree(cu.DevicePtr(p))
}

func (d *cuDevice) upload(dst dptr, src unsafe.Pointer, n int64) error {
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, n, d.compute); err != nil {
		return err
	}
	return d.compute.Synchronize()
}

func (d *cuDevice) uploadAsync(dst dptr, src unsafe.Pointer, n int64) error {
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, n, d.compute)
}

func (d *cuDevice) download(dst unsafe.Pointer, src dptr, n int64) error {
	if err := cu.MemcpyDtoHAsync(dst, cu.DevicePtr(src), n, d.compute); err != nil {
		return err
	}
	return d.compute.Synchronize()
}

func (d *cuDevice) zeroAsync(dst dptr, n int64) error {
	return cu.MemsetD8Async(cu.DevicePtr(dst), 0, n, d.compute)
}

func (d *cuDevice) launch(f kfunc, grid, block [3]uint32, args []uint64) error {
	return d.args.launch(uintptr(f), raw(d.compute), grid, block, args)
}

func (d *cuDevice) sync() error { return d.compute.Synchronize() }

func (d *cuDevice) memInfo() (free, total int64, err error) { return cu.MemInfo() }

func (d *cuDevice) hostAlloc(n int64) (unsafe.Pointer, error) { return hostAlloc(n) }

func (d *cuDevice) hostFree(p unsafe.Pointer) error { return cu.MemFreeHost(p) }

func (d *cuDevice) copyWaitsCompute() error {
	if err := d.computeEv.Record(d.compute); err != nil {
		return err
	}
	return d.copy.Wait(d.computeEv, 0)
}

func (d *cuDevice) computeWaitsCopy() error {
	if err := d.copyEv.Record(d.copy); err != nil {
		return err
	}
	return d.compute.Wait(d.copyEv, 0)
}

func (d *cuDevice) copyOut(dst unsafe.Pointer, src dptr, n int64) error {
	return cu.MemcpyDtoHAsync(dst, cu.DevicePtr(src), n, d.copy)
}

func (d *cuDevice) copyIn(dst dptr, src unsafe.Pointer, n int64) error {
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, n, d.copy)
}

func (d *cuDevice) syncCopy() error { return d.copy.Synchronize() }

// cuFence is an event.
type cuFence struct{ ev cu.Event }

func (f *cuFence) query() (bool, error) {
	err := f.ev.Query()
	if err == nil {
		return true, nil
	}
	if errors.Is(err, cu.NotReady) {
		return false, nil
	}
	return false, err
}

func (f *cuFence) wait() error { return f.ev.Synchronize() }
func (f *cuFence) destroy()    { cu.DestroyEvent(&f.ev) }

func (d *cuDevice) record(flags cu.EventFlags, s cu.Stream) (fence, error) {
	ev, err := cu.MakeEvent(flags)
	if err != nil {
		return nil, err
	}
	if err := ev.Record(s); err != nil {
		cu.DestroyEvent(&ev)
		return nil, err
	}
	return &cuFence{ev}, nil
}

func (d *cuDevice) fence() (fence, error) { return d.record(cu.DisableTiming, d.copy) }
func (d *cuDevice) timer() (fence, error) { return d.record(cu.DefaultEvent, d.compute) }

func (d *cuDevice) elapsed(start, stop fence) (float64, error) {
	return start.(*cuFence).ev.Elapsed(stop.(*cuFence).ev)
}

func (d *cuDevice) beginCapture() error { return beginCapture(raw(d.compute)) }

func (d *cuDevice) endCapture() (graph, error) {
	e, err := endCapture(raw(d.compute))
	if err != nil {
		return nil, err
	}
	return &cuGraph{exec: e, stream: raw(d.compute)}, nil
}

// cuGraph is an executable graph (CUgraphExec).
type cuGraph struct{ exec, stream uintptr }

func (g *cuGraph) launch() error { return graphLaunch(g.exec, g.stream) }
func (g *cuGraph) destroy()      { graphDestroy(g.exec) }

// close releases what openDevice made; it tolerates a partial open.
func (d *cuDevice) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if d.compute != (cu.Stream{}) {
		keep(d.compute.Synchronize())
	}
	for _, m := range d.mods {
		keep(m.Unload())
	}
	for _, ev := range []*cu.Event{&d.computeEv, &d.copyEv} {
		if *ev != (cu.Event{}) {
			keep(cu.DestroyEvent(ev))
		}
	}
	for _, s := range []*cu.Stream{&d.compute, &d.copy} {
		if *s != (cu.Stream{}) {
			keep(s.Destroy())
		}
	}
	if d.args.p != nil {
		d.args.free()
	}
	keep(d.dev.ReleasePrimaryCtx())
	return first
}

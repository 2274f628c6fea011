//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// opKind says what an op does.
type opKind uint8

const (
	opLaunch opKind = iota // launch kernel k
	opUpload               // copy data to dst on the compute stream
	opFunc                 // run fn
	opGraph                // run the launches of g (graph.go)
)

// op is one queued unit of work.
type op struct {
	kind  opKind
	k     kernelID
	grid  [3]uint32
	block [3]uint32
	nargs int
	args  [16]uint64

	dst   dptr
	data  []byte
	hoist int64 // for a staged upload: its buffer's size, which kernels may read (graph.go)

	fn func() error
	g  *graphEntry
}

// engine owns a device from one goroutine locked to its OS thread (CUDA
// contexts are current per thread). The backend hands it batches of ops;
// it runs them in order and keeps the first failure, which the next
// synchronous call reports.
type engine struct {
	dev device
	fns [numKernels]kfunc
	// missing names the optional kernels the device's modules lack (set
	// before the engine is ready, read-only after).
	missing []string
	work    chan []op
	spare   chan []op
	reply   chan error
	done    chan struct{}

	// Engine goroutine only.
	err   error // first failure not yet reported
	stats Stats
}

// startEngine starts the engine goroutine, opens the device on it with
// open and loads every kernel.
func startEngine(open func() (device, error)) (*engine, error) {
	e := &engine{
		work:  make(chan []op, 4),
		spare: make(chan []op, 8),
		reply: make(chan error, 1),
		done:  make(chan struct{}),
	}
	ready := make(chan error, 1)
	go e.loop(open, ready)
	if err := <-ready; err != nil {
		<-e.done
		return nil, err
	}
	return e, nil
}

func (e *engine) loop(open func() (device, error), ready chan<- error) {
	runtime.LockOSThread()
	defer close(e.done)
	defer runtime.UnlockOSThread()
	dev, err := open()
	if err != nil {
		ready <- err
		return
	}
	for i, s := range kernelSpecs {
		if e.fns[i], err = dev.kernel(s.module, s.name); err != nil {
			if optionalKernels[s.name] {
				e.missing = append(e.missing, s.name)
				continue
			}
			dev.close()
			ready <- fmt.Errorf("cuda: kernel %s: %w", s.name, err)
			return
		}
	}
	e.dev = dev
	ready <- nil
	for batch := range e.work {
		for i := range batch {
			o := &batch[i]
			var err error
			switch o.kind {
			case opLaunch:
				err = e.launchOp(o)
			case opUpload:
				err = dev.uploadAsync(o.dst, unsafe.Pointer(&o.data[0]), int64(len(o.data)))
			case opFunc:
				err = o.fn()
			case opGraph:
				err = e.runGraph(o.g)
			}
			if err != nil && e.err == nil {
				e.err = err
			}
			*o = op{} // drop references to data and closures
		}
		select {
		case e.spare <- batch[:0]:
		default:
		}
	}
}

func (e *engine) launchOp(o *op) error {
	if err := e.dev.launch(e.fns[o.k], o.grid, o.block, o.args[:o.nargs]); err != nil {
		return fmt.Errorf("cuda: launch %s: %w", kernelSpecs[o.k].name, err)
	}
	e.stats.Launches++
	return nil
}

// takeErr returns and clears the engine's first failure. Engine goroutine
// only.
func (e *engine) takeErr() error {
	err := e.err
	e.err = nil
	return err
}

// batch returns an empty op slice to fill.
func (e *engine) batch(n int) []op {
	select {
	case b := <-e.spare:
		return b
	default:
		return make([]op, 0, n)
	}
}

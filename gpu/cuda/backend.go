//go:build cuda || cudaemu

package cuda

import (
	"bytes"
	"fmt"
	"math"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
)

// Backend runs gpu.Backend operations on one CUDA device. Operations are
// validated on the calling goroutine (misuse panics there, as on the CPU
// backend), then queued for the device's engine goroutine, which launches
// them on the compute stream in order; Read, Sync and the methods that
// return an error wait for the queue. Like every gpu.Backend it is driven
// by one goroutine at a time.
type Backend struct {
	cfg    Config
	eng    *engine
	info   deviceInfo
	name   string
	queue  []op
	closed bool
	// failed is the first failure of a call that cannot return one (an
	// allocation for batch metadata, a KV block copy); Sync and Read
	// report it.
	failed  error
	allocs  map[dptr]int64 // live device allocations, freed by Close
	closers []func() error // other releases for Close (pinned memory)

	idsBuf, rowsBuf, maskBuf, outBuf staged
	// batchBufs hold the last batch staged for each group of layers
	// (gpu.Batch.Group), each re-uploaded only when it changes, at the
	// same device address step after step (graphs replay it).
	batchBufs [maxBatchBufs]staged
	// ropeBuf holds two RoPE configurations' frequencies (gemma3 alternates
	// its local and global layers'), rope says which; ropeLast is the slot
	// used last.
	ropeBuf  [2]staged
	ropeLast int

	graphs      map[uint64]*graphEntry // segments seen, by hash of their launches
	graphUse    uint64                 // LRU clock of graphs
	segmentLong bool                   // the segment was handed over early: no graph
	scratch     []int32
	rope        [2]ropeKey
}

var (
	_ gpu.Backend = (*Backend)(nil)
	_ gpu.KVSizer = (*Backend)(nil)
)

// New opens device cfg.Device. Without a usable device it returns a
// *NoDeviceError (errors.Is(err, gpu.ErrBackendUnavailable) holds).
func New(cfg Config) (*Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	eng, err := startEngine(func() (device, error) { return openDevice(cfg.Device) })
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, eng: eng, info: eng.dev.info(), allocs: map[dptr]int64{}, graphs: map[uint64]*graphEntry{}}
	b.name = fmt.Sprintf("%s:%d %s", driverName, cfg.Device, b.info.name)
	return b, nil
}

// Name returns "cuda:<ordinal> <device name>".
func (b *Backend) Name() string { return b.name }

// ComputeCapability returns the device's compute capability (9, 0 on an
// H100 or H200).
func (b *Backend) ComputeCapability() (major, minor int) { return b.info.major, b.info.minor }

// MemInfo returns the device memory this process can still allocate and
// the device's total, as the driver reports them (cuMemGetInfo).
func (b *Backend) MemInfo() (free, total int64, err error) {
	err = b.call(func() (err error) {
		free, total, err = b.eng.dev.memInfo()
		return err
	})
	return free, total, err
}

// KVBlocks returns how many blocks of cfg fit in fraction (0, 1] of the
// device memory that is free now, for sizing the KV arena after the
// weights are loaded.
func (b *Backend) KVBlocks(cfg gpu.KVConfig, fraction float64) (int, error) {
	if !(fraction > 0 && fraction <= 1) {
		return 0, fmt.Errorf("cuda: KV memory fraction %g is not in (0, 1]", fraction)
	}
	free, _, err := b.MemInfo()
	if err != nil {
		return 0, err
	}
	cfg = cfg.WithDefaults()
	bb := cfg.BlockBytes()
	if bb <= 0 {
		return 0, fmt.Errorf("%w: KV config %+v", gpu.ErrShape, cfg)
	}
	return int(float64(free) * fraction / float64(bb)), nil
}

// enqueue adds an op. Without graphs the queue goes to the engine every
// FlushOps ops; with graphs it is held until the caller waits (see
// endSegment), unless it grows past maxSegmentOps.
func (b *Backend) enqueue(o op) {
	if b.closed {
		panic("cuda: use of a closed backend")
	}
	if b.queue == nil {
		b.queue = b.eng.batch(b.cfg.FlushOps)
	}
	b.queue = append(b.queue, o)
	if b.cfg.NoGraphs && len(b.queue) >= b.cfg.FlushOps {
		b.flush()
	} else if len(b.queue) >= maxSegmentOps {
		b.segmentLong = true
		b.flush()
	}
}

func (b *Backend) flush() {
	if len(b.queue) > 0 {
		b.eng.work <- b.queue
		b.queue = nil
	}
}

// do queues fn to run on the engine goroutine.
func (b *Backend) do(fn func() error) { b.enqueue(op{kind: opFunc, fn: fn}) }

// call runs fn on the engine goroutine after everything queued and returns
// its result.
func (b *Backend) call(fn func() error) error {
	if b.closed {
		return ErrClosed
	}
	b.endSegment()
	e := b.eng
	e.work <- []op{{kind: opFunc, fn: func() error { e.reply <- fn(); return nil }}}
	return <-e.reply
}

// Stats returns the engine's counts of kernel and graph launches.
func (b *Backend) Stats() (Stats, error) {
	var s Stats
	err := b.call(func() error {
		s = b.eng.stats
		return nil
	})
	return s, err
}

// launch queues kernel k with the given parameters (see kernels.go).
func (b *Backend) launch(k kernelID, grid [3]uint32, block uint32, args ...uint64) {
	if len(args) != len(kernelSpecs[k].args) {
		panic(fmt.Sprintf("cuda: kernel %s takes %d arguments, got %d", kernelSpecs[k].name, len(kernelSpecs[k].args), len(args)))
	}
	o := op{kind: opLaunch, k: k, grid: grid, block: [3]uint32{block, 1, 1}, nargs: len(args)}
	copy(o.args[:], args)
	b.enqueue(o)
}

func grid1(n, per int) [3]uint32 { return [3]uint32{uint32((n + per - 1) / per), 1, 1} }

func f32(x float32) uint64 { return uint64(math.Float32bits(x)) }
func f64(x float64) uint64 { return math.Float64bits(x) }
func i32(x int) uint64     { return uint64(uint32(int32(x))) }
func ptr(p dptr) uint64    { return uint64(p) }

// alloc allocates device memory now; zero bytes give a null pointer.
func (b *Backend) alloc(n int64, zero bool) (dptr, error) {
	if n == 0 {
		return 0, nil
	}
	var p dptr
	err := b.call(func() (err error) {
		if p, err = b.eng.dev.alloc(n); err != nil {
			return err
		}
		if zero {
			err = b.eng.dev.zeroAsync(p, n)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: allocating %d bytes: %w", n, err)
	}
	b.allocs[p] = n
	return p, nil
}

// release queues freeing p after the work queued so far.
func (b *Backend) release(p dptr) {
	if p == 0 {
		return
	}
	if _, ok := b.allocs[p]; !ok {
		panic(fmt.Sprintf("cuda: free of unknown device pointer %#x", uintptr(p)))
	}
	delete(b.allocs, p)
	b.do(func() error { return b.eng.dev.free(p) })
}

// tensor is a row-major float32 matrix in device memory.
type tensor struct {
	b          *Backend
	p          dptr
	rows, cols int
	view       bool
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }

// t returns x as this backend's tensor, panicking on a foreign one.
func (b *Backend) t(x gpu.Tensor) *tensor {
	t := x.(*tensor)
	if t.b != b {
		panic("cuda: tensor of another backend")
	}
	if t.p == 0 && t.rows*t.cols != 0 {
		panic("cuda: use of a freed tensor")
	}
	return t
}

// NewTensor allocates a zeroed tensor.
func (b *Backend) NewTensor(rows, cols int) (gpu.Tensor, error) {
	if rows < 0 || cols < 0 {
		return nil, fmt.Errorf("%w: tensor %d×%d", gpu.ErrShape, rows, cols)
	}
	p, err := b.alloc(int64(rows)*int64(cols)*4, true)
	if err != nil {
		return nil, err
	}
	return &tensor{b: b, p: p, rows: rows, cols: cols}, nil
}

// View returns rows [from, from+n) of x.
func (b *Backend) View(x gpu.Tensor, from, n int) gpu.Tensor {
	t := b.t(x)
	if from < 0 || n < 0 || from+n > t.rows {
		panic(fmt.Sprintf("cuda: view [%d,+%d) of %d rows", from, n, t.rows))
	}
	return &tensor{b: b, p: t.p + dptr(from*t.cols*4), rows: n, cols: t.cols, view: true}
}

// Free releases a tensor after the work queued so far; freeing a view
// only invalidates the view.
func (b *Backend) Free(x gpu.Tensor) {
	t := b.t(x)
	if !t.view {
		b.release(t.p)
	}
	t.p = 0
}

// Write copies src into dst (queued; src may be reused at once).
func (b *Backend) Write(dst gpu.Tensor, src []float32) {
	t := b.t(dst)
	if len(src) != t.rows*t.cols {
		panic(fmt.Sprintf("cuda: write %d floats into %d×%d", len(src), t.rows, t.cols))
	}
	if len(src) == 0 {
		return
	}
	c := make([]byte, 4*len(src))
	copy(c, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), len(c)))
	b.enqueue(op{kind: opUpload, dst: t.p, data: c})
}

// Read waits for the queued work and copies src into dst.
func (b *Backend) Read(src gpu.Tensor, dst []float32) error {
	t := b.t(src)
	if len(dst) != t.rows*t.cols {
		return fmt.Errorf("%w: read %d×%d into %d floats", gpu.ErrShape, t.rows, t.cols, len(dst))
	}
	if err := b.takeFailed(); err != nil {
		return err
	}
	return b.call(func() error {
		if err := b.eng.takeErr(); err != nil {
			return err
		}
		if len(dst) == 0 {
			return nil
		}
		return b.eng.dev.download(unsafe.Pointer(&dst[0]), t.p, int64(len(dst))*4)
	})
}

// Sync waits for the queued work and returns the first failure since the
// last Sync or Read.
func (b *Backend) Sync() error {
	if err := b.takeFailed(); err != nil {
		return err
	}
	return b.call(func() error {
		err := b.eng.dev.sync()
		if e := b.eng.takeErr(); e != nil {
			err = e
		}
		return err
	})
}

func (b *Backend) takeFailed() error {
	err := b.failed
	b.failed = nil
	return err
}

func (b *Backend) fail(err error) {
	if b.failed == nil {
		b.failed = err
	}
}

// Close waits for the queued work and releases every allocation, the
// streams and the context. It is safe to call twice.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	for _, g := range b.graphs {
		b.dropGraph(g)
	}
	clear(b.graphs)
	err := b.call(func() error {
		err := b.eng.dev.sync()
		for _, c := range b.closers {
			if e := c(); e != nil && err == nil {
				err = e
			}
		}
		for p := range b.allocs {
			if e := b.eng.dev.free(p); e != nil && err == nil {
				err = e
			}
		}
		if e := b.eng.dev.close(); e != nil && err == nil {
			err = e
		}
		return err
	})
	clear(b.allocs)
	b.closed = true
	close(b.eng.work)
	<-b.eng.done
	return err
}

// matrix is a weight matrix in the device layout of pack.go.
type matrix struct {
	b          *Backend
	t          gpu.DType
	rows, cols int
	kp         int
	p          dptr
	a          [4]dptr // sections a0..a3
}

func (m *matrix) Rows() int        { return m.rows }
func (m *matrix) Cols() int        { return m.cols }
func (m *matrix) DType() gpu.DType { return m.t }

func (b *Backend) m(w gpu.Matrix) *matrix {
	m := w.(*matrix)
	if m.b != b {
		panic("cuda: matrix of another backend")
	}
	return m
}

// NewMatrix repacks the weights for the kernels (see pack.go) and uploads
// them; data is not retained.
func (b *Backend) NewMatrix(t gpu.DType, rows, cols int, data []byte) (gpu.Matrix, error) {
	if rows < 0 || cols < 0 {
		return nil, fmt.Errorf("%w: matrix %d×%d", gpu.ErrShape, rows, cols)
	}
	pk, err := pack(t, rows, cols, data)
	if err != nil {
		return nil, err
	}
	if (rows+7)/8 > 65535 {
		return nil, fmt.Errorf("%w: %d rows is more than the matmul grid takes (524280)", gpu.ErrShape, rows)
	}
	p, err := b.alloc(int64(len(pk.data)), false)
	if err != nil {
		return nil, err
	}
	m := &matrix{b: b, t: t, rows: rows, cols: cols, kp: pk.kp, p: p}
	for i := range m.a {
		m.a[i] = p + dptr(pk.off[i])
	}
	if len(pk.data) > 0 {
		err = b.call(func() error { return b.eng.dev.upload(p, unsafe.Pointer(&pk.data[0]), int64(len(pk.data))) })
	}
	if err != nil {
		b.release(p)
		return nil, fmt.Errorf("cuda: uploading a %v matrix %d×%d: %w", t, rows, cols, err)
	}
	return m, nil
}

// staged is a device buffer holding a small host array (batch metadata,
// token ids, a mask) that is uploaded again only when it changes.
type staged struct {
	p    dptr
	cap  int64
	last []byte
}

// stage makes data available on the device and returns its address; the
// upload is queued on the compute stream, after the kernels that read the
// previous contents. It returns 0 after recording a failure.
func (b *Backend) stage(s *staged, data []byte) dptr {
	if s.p != 0 && bytes.Equal(s.last, data) {
		return s.p
	}
	if n := int64(len(data)); n > s.cap || s.p == 0 {
		c := max(n, 2*s.cap, 256)
		p, err := b.alloc(c, false)
		if err != nil {
			b.fail(err)
			return 0
		}
		b.release(s.p)
		s.p, s.cap = p, c
	}
	c := append([]byte(nil), data...)
	s.last = c
	if len(c) > 0 {
		b.enqueue(op{kind: opUpload, dst: s.p, data: c, hoist: s.cap})
	}
	return s.p
}

func int32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// maxBatchBufs is how many staged batches stageBatch keeps: more than the
// layer groups of the models we run (gemma3: one global group and five
// local ones); groups beyond it share.
const maxBatchBufs = 8

// batchMeta is the device copy of a batch: pos and seq per row, then the
// offset of each sequence's block table, then the tables.
type batchMeta struct {
	pos, seq, tabOff, tabs dptr
}

// stageBatch uploads bt's arrays (when they changed since the last call).
func (b *Backend) stageBatch(bt *gpu.Batch) (batchMeta, bool) {
	rows, ns := len(bt.Pos), len(bt.Tables)
	s := b.scratch[:0]
	s = append(s, bt.Pos...)
	s = append(s, bt.Seq...)
	off := int32(0)
	for _, t := range bt.Tables {
		s = append(s, off)
		off += int32(len(t))
	}
	for _, t := range bt.Tables {
		s = append(s, t...)
	}
	b.scratch = s
	data := int32Bytes(s)
	buf := &b.batchBufs[bt.Group%maxBatchBufs]
	p := b.stage(buf, data)
	if p == 0 {
		return batchMeta{}, false
	}
	return batchMeta{
		pos:    p,
		seq:    p + dptr(4*rows),
		tabOff: p + dptr(8*rows),
		tabs:   p + dptr(4*(2*rows+ns)),
	}, true
}

package cpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
)

// Config configures the CPU backend.
type Config struct {
	// Threads is the number of worker goroutines for each operation.
	// Defaults to runtime.GOMAXPROCS(0).
	Threads int
}

// WithDefaults returns the config with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Threads <= 0 {
		c.Threads = runtime.GOMAXPROCS(0)
	}
	return c
}

// Backend runs the operations of gpu.Backend on the CPU. Operations execute
// synchronously; Sync and Read never wait.
type Backend struct {
	cfg  Config
	pool *kernels.Pool
	mm   *kernels.MatMul
	att  attnCall
	rope [2]ropeCache
	// ropeLast is the configuration of the last RoPE call.
	ropeLast gpu.RoPE
	// halfRow is StoreKV's scratch row of an F16 arena; q8Row and
	// q8Scale those of a Q8_0 arena.
	halfRow []uint16
	q8Row   []int8
	q8Scale []float32
}

var _ gpu.ArchOps = (*Backend)(nil)

var _ gpu.Backend = (*Backend)(nil)

var _ gpu.HostParallel = (*Backend)(nil)

// New returns a CPU backend.
func New(cfg Config) *Backend {
	cfg = cfg.WithDefaults()
	p := kernels.NewPool(cfg.Threads)
	b := &Backend{cfg: cfg, pool: p, mm: kernels.NewMatMul(p)}
	b.att.task = b.att.run
	return b
}

// Name returns "cpu".
func (b *Backend) Name() string { return fmt.Sprintf("cpu (%d threads)", b.cfg.Threads) }

// Threads returns the number of threads operations use.
func (b *Backend) Threads() int { return b.cfg.Threads }

// Close stops the worker goroutines. It is safe to call twice; after it,
// operations run on the caller's goroutine alone (kernels.Pool).
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

type tensor struct {
	rows, cols int
	data       []float32
	// view is the last view made of this tensor; View returns it again
	// for the same rows, so that steady-state steps allocate nothing.
	view *tensor
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }

type matrix struct {
	w kernels.Weights
}

func (m *matrix) Rows() int        { return m.w.Rows }
func (m *matrix) Cols() int        { return m.w.Cols }
func (m *matrix) DType() gpu.DType { return m.w.Type }

// kvArena is the paged cache: Blocks blocks of BlockBytes each, values of
// F32 or F16 (exactly one of f32 and f16 is set; raw is the same memory as
// bytes). In a block, layer l's region is laid out as K then V, each of
// BlockTokens×KVDim values: K transposed, KVDim rows of BlockTokens keys
// (component c of the key at slot j is value c·BlockTokens + j, so kv head
// g's rows are rows g·hd… and a row of a block of 16 is one 512-bit
// register of the tile kernels), V per kv head of HeadDim: BlockTokens
// rows of HeadDim for each head in turn, so that attention reads one
// head's V rows of a block in one run.
//
// A Q8_0 arena (q8) keeps the same places in bytes, int8 values each, and
// after each layer's K and after its V their float16 scales, one per 32
// of a head's components: K's head by head, hd/32 rows of BlockTokens
// (one per key); V's head by head, BlockTokens rows of hd/32. Its blocks
// are llama.cpp's Q8_0 bytes: 34 for every 32 values.
type kvArena struct {
	cfg gpu.KVConfig
	be  int // values (bytes for Q8_0) per block
	le  int // values (bytes) per layer of a block: its K region, then V
	f32 []float32
	f16 []uint16
	q8  []byte
	raw []byte
}

// q8Bytes is the size of a Q8_0 region of n values: the values, then a
// float16 scale for every 32.
func q8Bytes(n int) int { return n + n/16 }

func (k *kvArena) Config() gpu.KVConfig { return k.cfg }

func (k *kvArena) ReadBlock(blk int, dst []byte) {
	n := len(k.raw) / k.cfg.Blocks
	copy(dst[:n], k.raw[blk*n:(blk+1)*n])
}

func (k *kvArena) WriteBlock(blk int, src []byte) {
	n := len(k.raw) / k.cfg.Blocks
	copy(k.raw[blk*n:(blk+1)*n], src[:n])
}

// rows returns the K (v false) or V rows of kv head g of layer, head width
// hd, for the blocks of tab.
func (k *kvArena) rows(tab []int32, layer, g, hd int, v bool) kernels.KVRows {
	c := &k.cfg
	if k.q8 != nil {
		if hd != c.HeadDim {
			panic(fmt.Sprintf("cpu: attention heads of %d over a Q8_0 cache of heads of %d", hd, c.HeadDim))
		}
		n := c.BlockTokens * c.KVDim // values of a K or V region
		r := layer*k.le + g*hd*c.BlockTokens
		scales := layer*k.le + n + g*(hd/32)*c.BlockTokens*2
		rows := kernels.KVRows{Q8: k.q8, Tab: tab, BlockElems: k.be, Off: r, BT: c.BlockTokens, SOff: scales - r}
		if v {
			rows.Off, rows.SOff = r+q8Bytes(n), scales-r
			rows.Stride, rows.SStride = hd, hd/32*2
		}
		return rows
	}
	off := layer*2*c.BlockTokens*c.KVDim + g*hd*c.BlockTokens
	stride := c.KVDim
	if v {
		off = layer*2*c.BlockTokens*c.KVDim + c.BlockTokens*c.KVDim + g*hd
		if hd == c.HeadDim { // V rows of a head together (StoreKV)
			off, stride = layer*2*c.BlockTokens*c.KVDim+c.BlockTokens*c.KVDim+g*hd*c.BlockTokens, hd
		}
	}
	return kernels.KVRows{F32: k.f32, F16: k.f16, Tab: tab, BlockElems: k.be, Off: off, BT: c.BlockTokens, Stride: stride}
}

// NewTensor allocates a zeroed tensor.
func (b *Backend) NewTensor(rows, cols int) (gpu.Tensor, error) {
	if rows < 0 || cols < 0 {
		return nil, fmt.Errorf("%w: tensor %d×%d", gpu.ErrShape, rows, cols)
	}
	return &tensor{rows: rows, cols: cols, data: make([]float32, rows*cols)}, nil
}

// NewMatrix wraps data without copying it.
func (b *Backend) NewMatrix(t gpu.DType, rows, cols int, data []byte) (gpu.Matrix, error) {
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if len(data) != rows*rb {
		return nil, fmt.Errorf("%w: %v matrix %d×%d needs %d bytes, got %d", gpu.ErrShape, t, rows, cols, rows*rb, len(data))
	}
	if t == gpu.F32 && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 != 0 {
		data = append([]byte(nil), data...) // the F32 kernels read floats in place
	}
	w := kernels.Weights{Type: t, Rows: rows, Cols: cols, Data: data}
	// Q8_0, Q4_0, Q4_K and Q6_K weights are also kept packed for the
	// packed kernels (AVX512-VNNI, else AVX2) wherever the assembly runs
	// (kernels.PackQ8_0, PackQ4_0, PackQ4_K, PackQ6_K): 6%, 11%, 11% and 1%
	// more bytes than the file's, in memory.
	switch t {
	case gpu.Q8_0:
		w.Pack = kernels.PackQ8_0(&w)
	case gpu.Q4_0:
		w.Pack = kernels.PackQ4_0(&w)
	case gpu.Q4_K:
		w.Pack = kernels.PackQ4_K(&w)
	case gpu.Q6_K:
		w.Pack = kernels.PackQ6_K(&w)
	case gpu.F32:
		// F32 weights are kept only in panels (kernels.PackF32): the
		// matrix products and the embedding lookups read them, so the
		// row-major data is dropped (its bytes are the file's, or a copy
		// the loader made), and they take the same bytes but for up to 15
		// zero rows of padding.
		if w.Pack = kernels.PackF32(&w); w.Pack != nil {
			w.Data = nil
		}
	}
	return &matrix{w}, nil
}

// NewKV allocates the KV arena, of F32, F16 or Q8_0 values.
func (b *Backend) NewKV(cfg gpu.KVConfig) (gpu.KV, error) {
	cfg = cfg.WithDefaults()
	if cfg.Layers <= 0 || cfg.KVDim <= 0 || cfg.Blocks <= 0 || cfg.BlockTokens <= 0 || cfg.HeadDim <= 0 || cfg.KVDim%cfg.HeadDim != 0 {
		return nil, fmt.Errorf("%w: KV config %+v: layers, kv dim, blocks and block tokens must be positive, kv dim a multiple of the head dim", gpu.ErrShape, cfg)
	}
	be := cfg.BlockFloats()
	kv := &kvArena{cfg: cfg, be: be, le: 2 * cfg.BlockTokens * cfg.KVDim}
	switch cfg.Type {
	case gpu.Q8_0:
		if cfg.HeadDim%32 != 0 {
			return nil, fmt.Errorf("%w: a Q8_0 KV cache needs heads of a multiple of 32 values, these have %d", gpu.ErrUnsupportedType, cfg.HeadDim)
		}
		kv.le = 2 * q8Bytes(cfg.BlockTokens*cfg.KVDim)
		kv.be = cfg.Layers * kv.le
		kv.q8 = make([]byte, kv.be*cfg.Blocks)
		kv.raw = kv.q8
	case gpu.F32:
		kv.f32 = make([]float32, be*cfg.Blocks)
		kv.raw = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(kv.f32))), 4*len(kv.f32))
	case gpu.F16:
		kv.f16 = make([]uint16, be*cfg.Blocks)
		kv.raw = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(kv.f16))), 2*len(kv.f16))
	default:
		return nil, fmt.Errorf("%w: KV cache type %v on the CPU (F16, F32 or Q8_0)", gpu.ErrUnsupportedType, cfg.Type)
	}
	b.commit(kv.raw)
	return kv, nil
}

// KVTypes returns the KV cache types the CPU backend stores: F16 (the
// default), F32 and Q8_0 (fast with AVX-512; the Go kernels elsewhere).
func (b *Backend) KVTypes() []gpu.DType { return []gpu.DType{gpu.F16, gpu.F32, gpu.Q8_0} }

// commit writes to every page of a new arena, on the pool's threads, so
// that the memory is the process's from the start: otherwise each page
// faults when a sequence first writes a block there, inside the steps
// (on a VM a first touch also faults in the host; a 512 MiB arena's first
// pass made a 16-row decode step 1.4× slower), and an overcommitted host
// would fail a step, not the start.
func (b *Backend) commit(data []byte) {
	const page = gpu.PageBytes
	pages := (len(data) + page - 1) / page
	b.pool.For(pages, func(lo, hi int) { gpu.CommitPages(data[lo*page : min(hi*page, len(data))]) })
}

// View returns rows [from, from+n) of x.
func (b *Backend) View(x gpu.Tensor, from, n int) gpu.Tensor {
	t := x.(*tensor)
	if from < 0 || n < 0 || from+n > t.rows {
		panic(fmt.Sprintf("cpu: view [%d,+%d) of %d rows", from, n, t.rows))
	}
	data := t.data[from*t.cols : (from+n)*t.cols : (from+n)*t.cols]
	if v := t.view; v != nil && v.rows == n && v.cols == t.cols && len(v.data) == len(data) &&
		cap(v.data) == cap(data) && unsafe.SliceData(v.data) == unsafe.SliceData(data) {
		return v
	}
	v := &tensor{rows: n, cols: t.cols, data: data}
	t.view = v
	return v
}

// Free drops the tensor's storage.
func (b *Backend) Free(x gpu.Tensor) {
	t := x.(*tensor)
	t.data, t.view = nil, nil
}

// Write copies src into dst.
func (b *Backend) Write(dst gpu.Tensor, src []float32) {
	t := dst.(*tensor)
	if len(src) != len(t.data) {
		panic(fmt.Sprintf("cpu: write %d floats into %d×%d", len(src), t.rows, t.cols))
	}
	copy(t.data, src)
}

// Read copies src into dst.
func (b *Backend) Read(src gpu.Tensor, dst []float32) error {
	t := src.(*tensor)
	if len(dst) != len(t.data) {
		return fmt.Errorf("%w: read %d×%d into %d floats", gpu.ErrShape, t.rows, t.cols, len(dst))
	}
	if len(dst) < parallelCopy || b.cfg.Threads == 1 {
		copy(dst, t.data)
		return nil
	}
	// A step's logits (16 rows of a 32,000-token vocabulary: 2 MiB) take
	// one thread 100–200 µs to copy, while the others wait for the next
	// operation.
	b.pool.ForEach(len(dst), func(lo, hi int) { copy(dst[lo:hi], t.data[lo:hi]) })
	return nil
}

// parallelCopy is the number of floats from which Read copies on every
// thread.
const parallelCopy = 64 << 10

// Sync returns nil: CPU operations complete before they return.
func (b *Backend) Sync() error { return nil }

// Synchronous reports true: every operation is done when it returns
// (gpu.Synchronous).
func (b *Backend) Synchronous() bool { return true }

// BatchInvariant reports that a row's results do not depend on the batch
// (gpu.BatchInvariant): every kernel sums a row in the same order in any
// batch (TestMatMulBatchInvariant, TestLongInvariance).
func (b *Backend) BatchInvariant() bool { return true }

// HostFor runs fn over [0, n) on the backend's threads
// (gpu.HostParallel); after Close, on the caller's alone.
func (b *Backend) HostFor(n int, fn func(lo, hi int)) { b.pool.For(n, fn) }

// Data exposes a tensor's storage, for tests and host-side consumers that
// want to avoid a copy.
func Data(x gpu.Tensor) []float32 { return x.(*tensor).data }

func same(op string, a, b *tensor) {
	if a.rows != b.rows || a.cols != b.cols {
		panic(fmt.Sprintf("cpu: %s: shapes %d×%d and %d×%d", op, a.rows, a.cols, b.rows, b.cols))
	}
}

package kernels

import (
	"fmt"
	"sync"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// Weights is a row-major weight matrix: Rows rows of Cols elements, each row
// Type.RowBytes(Cols) bytes of Type blocks.
type Weights struct {
	Type       gpu.DType
	Rows, Cols int
	Data       []byte
	// Pack, when set, is Data repacked for the packed kernels (PackQ8_0,
	// PackQ4_0, PackQ4_K, PackQ6_K, PackF32), which then multiply every row
	// at every batch size. F32 panels replace Data: it may be nil then.
	Pack []byte
}

func (w *Weights) rowBytes() int {
	n, err := w.Type.RowBytes(w.Cols)
	if err != nil {
		panic("kernels: " + err.Error())
	}
	return n
}

// DequantizeRow decodes row r of w into dst[:w.Cols].
func DequantizeRow(w *Weights, r int, dst []float32) {
	if w.Type == gpu.F32 && w.Data == nil && w.Pack != nil {
		packedF32Row(w.Pack, w.Cols, r, dst)
		return
	}
	rb := w.rowBytes()
	if err := quant.Dequantize(w.Type, w.Data[r*rb:(r+1)*rb], dst[:w.Cols]); err != nil {
		panic("kernels: " + err.Error())
	}
}

// activation formats
const (
	actF32 = iota // float32 x as is
	actQ8         // Q8_0-style blocks of 32
	actQ4         // pairQ4: Q8_0 quantization laid out for Q4_0
	actQ8K        // blockQ8K super-blocks
)

func actKind(t gpu.DType) int {
	switch t {
	case gpu.Q8_0, gpu.Q4_1, gpu.Q5_0, gpu.Q5_1:
		return actQ8
	case gpu.Q4_0:
		return actQ4
	case gpu.Q4_K, gpu.Q6_K, gpu.Q2_K, gpu.Q3_K, gpu.Q5_K:
		return actQ8K
	}
	return actF32
}

// actKind is the activation quantization of the current call: Q8_0 blocks
// for the packed Q8_0 and Q4_0 kernels, else the weight type's (actKind).
func (mm *MatMul) actKind() int {
	if mm.pack != nil && (mm.t == gpu.Q8_0 || mm.t == gpu.Q4_0) {
		return actQ8
	}
	return actKind(mm.t)
}

// actRowBytes is the size of one activation row of n elements.
func actRowBytes(t gpu.DType, n int) int {
	switch actKind(t) {
	case actQ8:
		return n + n/qk8*4
	case actQ4:
		return q4Pairs(n) * 128
	case actQ8K:
		return n / qkK * 320
	}
	return 4 * n
}

// q4Pairs is the number of pairQ4 in an activation row of n elements.
func q4Pairs(n int) int { return (n/qk8 + 1) / 2 }

// actKey says what the activation scratch holds: x (its first element),
// M rows of cols, quantized as kind (with pack bias for the packed Q8_0
// blocks' corrections).
type actKey struct {
	kind, m, cols int
	bias          int32
	x             *float32
}

type planKey struct {
	t          gpu.DType
	rows, cols int
	bucket     int
	packed     bool
}

// plan is how MatMul runs one shape: the work is cut into tasks of
// rowBlock weight rows × xBlock activation rows, ordered so that the tasks
// sharing a weight block are consecutive.
type plan struct {
	x4       bool // use the four-row kernels
	rowBlock int
	xBlock   int  // activation rows per task (a multiple of 4 when < M)
	serial   bool // too little work to wake the pool
}

// mBucket groups batch sizes that share a plan.
func mBucket(m int) int {
	switch {
	case m <= 1:
		return 1
	case m < 4:
		return 3
	case m < 16:
		return 15
	case m < 64:
		return 63
	case m < 256:
		return 255
	}
	return 1 << 30
}

const (
	l2Bytes     = 256 << 10 // what we assume stays in a core's L2
	serialBytes = 256 << 10 // weight bytes × rows below which one thread runs it

	// Waking a parked worker takes several microseconds (10 or more on a
	// busy machine), about what a thread needs for 256 KiB of weights from
	// L2 or L3, so smaller products run on the calling thread.
)

func choosePlan(k planKey, threads int) plan {
	var p plan
	rb, _ := k.t.RowBytes(k.cols)
	m := min(k.bucket, 1024) // representative batch size
	p.x4 = k.bucket >= 4
	// Activation rows per task: all of them while they fit in L2 with room
	// for the weights, else a multiple of 4 that does.
	ab := actRowBytes(k.t, k.cols)
	p.xBlock = max(4, (l2Bytes/2/ab)&^3)
	if m <= p.xBlock {
		p.xBlock = 1 << 30 // all rows in one block
	}
	nxb := (m + min(m, p.xBlock) - 1) / min(m, p.xBlock)
	// Weight rows per task: enough tasks for dynamic balance (8 per thread),
	// and a block small enough to stay in L2 while the activation blocks
	// stream past it.
	tasks := 8 * threads
	wb := max(1, tasks/nxb)
	p.rowBlock = max(1, (k.rows+wb-1)/wb)
	if lim := max(4, l2Bytes/2/max(rb, 1)); nxb > 1 && p.rowBlock > lim {
		p.rowBlock = lim
	}
	p.serial = threads == 1 || k.rows*rb*m < serialBytes
	if p.serial && nxb == 1 {
		// Nothing to balance: one task, so that the kernels see long runs
		// of weight rows; for more than one activation row, blocks of
		// weight rows that stay in L2 while every row passes them (a
		// decode step verifying drafts, a small batch), else each row
		// reads the weights from memory again.
		p.rowBlock = k.rows
		if m > 1 {
			p.rowBlock = min(k.rows, max(16, l2Bytes/2/max(rb, 1)))
		}
	}
	if k.packed && k.t == gpu.F32 {
		// tileF32 blocks K and the panels for the caches itself: a task is
		// all the activation rows by whole groups of 4 panels, enough tasks
		// to balance the threads (decode: the plan above, in panels).
		p.xBlock = 1 << 30
		if m > 1 {
			p.rowBlock = k.rows
			if !p.serial {
				p.rowBlock = max(4*f32Panel, (k.rows/(8*threads))&^(4*f32Panel-1))
			}
		}
		if p.rowBlock < k.rows {
			p.rowBlock = max(f32Panel, p.rowBlock-p.rowBlock%f32Panel)
		}
	} else if k.packed {
		if p.rowBlock < k.rows {
			p.rowBlock = max(q8Group, p.rowBlock-p.rowBlock%q8Group) // whole packed groups
			if k.bucket > q8MaxRows && p.rowBlock > q8Group {
				// Whole pairs of groups for the two-group kernels, to
				// the nearest: blocks of 3 groups (768×2048 Q8_0: 60
				// rows in L2's share, 48 in groups) ran a third of
				// their calls through the one-group kernel.
				p.rowBlock = max(2*q8Group, (p.rowBlock+q8Group)/(2*q8Group)*(2*q8Group))
			}
		}
		if p.xBlock < m {
			p.xBlock = max(q8MaxRows, p.xBlock-p.xBlock%q8MaxRows) // whole kernel calls
		}
	} else if wr := wideRows(k.t, k.cols); p.x4 && wr > 0 && p.rowBlock > wr && p.rowBlock < k.rows {
		p.rowBlock -= p.rowBlock % wr // whole wide tiles
	} else if p.x4 && isFloat(k.t) && p.rowBlock > 3 && p.rowBlock < k.rows {
		p.rowBlock -= p.rowBlock % 3 // whole 4×3 tiles
	}
	return p
}

// MatMul multiplies activations by weight matrices on a Pool. It keeps
// per-shape plans and scratch buffers, so one MatMul serves one caller at a
// time.
type MatMul struct {
	pool   *Pool
	mu     sync.Mutex
	plans  map[planKey]plan
	recent [32]struct {
		key planKey
		p   plan
		ok  bool
	}

	// The current call, read by the tasks.
	t          gpu.DType
	dst, x     []float32
	m          int
	rows, cols int
	rb         int
	w          []byte
	p          plan
	wr         int          // weight rows of the wide kernels (wideRows), 0: none
	pack       []byte       // the packed weights (PackQ8_0), nil: none
	packWith   *packKernels // tests: the packed kernels to run (nil: packKernels')
	f32With    *f32Kernels  // tests: the packed F32 kernels to run (nil: f32Kernels')
	nxb        int          // activation blocks
	xb         int          // activation rows per block
	task       func(lo, hi int)
	quantTask  func(lo, hi int)

	// Activation scratch, and what it holds (RunShared).
	actKey actKey
	aq     []int8
	ad     []float32
	am     []q8Meta // with pack
	ap     []pairQ4
	akb    []blockQ8K
}

// NewMatMul returns a MatMul that runs on p.
func NewMatMul(p *Pool) *MatMul {
	mm := &MatMul{pool: p, plans: make(map[planKey]plan)}
	mm.task = mm.runTasks
	mm.quantTask = mm.quantRows
	return mm
}

// Run computes dst[m·w.Rows + r] = Σ_k x[m·w.Cols + k] · W[r][k] for
// m < M: dst = x·Wᵀ with x M×Cols and dst M×Rows, both row-major.
// Quantized weights multiply a copy of x quantized to 8 bits (Q8_0 blocks
// for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1, Q8_K super-blocks for the
// K-quants), as ggml does.
func (mm *MatMul) Run(dst, x []float32, M int, w *Weights) {
	mm.RunShared(dst, x, M, w, false)
}

// RunShared is Run where same says that x (the same slice, M and Cols)
// has not changed since the previous Run or RunShared: its quantized copy
// is used again where that call's weights took the same activations
// (several projections of one input). The results are Run's.
func (mm *MatMul) RunShared(dst, x []float32, M int, w *Weights, same bool) {
	if M <= 0 || w.Rows == 0 {
		return
	}
	rb := w.rowBytes()
	have := len(w.Data)
	if w.Type == gpu.F32 && w.Pack != nil {
		have = len(w.Pack) // the panels, their padding beside
	}
	if len(x) < M*w.Cols || len(dst) < M*w.Rows || have < w.Rows*rb {
		panic(fmt.Sprintf("kernels: MatMul sizes: dst %d, x %d, M %d, weights %v %d×%d in %d bytes",
			len(dst), len(x), M, w.Type, w.Rows, w.Cols, have))
	}
	mm.mu.Lock()
	defer mm.mu.Unlock()
	packed := w.Pack != nil
	key := planKey{w.Type, w.Rows, w.Cols, mBucket(M), packed}
	p := mm.plan(key)
	mm.t, mm.dst, mm.x, mm.m = w.Type, dst, x, M
	mm.rows, mm.cols, mm.rb, mm.w, mm.p = w.Rows, w.Cols, rb, w.Data, p
	mm.wr, mm.pack = 0, nil
	if packed {
		mm.pack = w.Pack
	}
	if p.x4 {
		mm.wr = wideRows(w.Type, w.Cols)
	}
	if w.Cols == 0 {
		clear(dst[:M*w.Rows])
		return
	}

	ak := actKey{kind: mm.actKind(), m: M, cols: w.Cols, x: &x[0]}
	if mm.pack != nil && ak.kind == actQ8 {
		ak.bias = packBias(w.Type)
	}
	if !same || ak != mm.actKey || ak.kind == actF32 {
		mm.quantize()
	}
	mm.actKey = ak

	xb := min(M, p.xBlock)
	mm.nxb = (M + xb - 1) / xb
	if packed && mm.nxb > 1 {
		// Activation blocks of nearly equal size (whole kernel calls),
		// so that the tasks cost about the same: 512 rows in blocks of
		// at most 144 are 4 of 132, 132, 132 and 116, not 144, 144, 144
		// and 80.
		xb = (M + mm.nxb - 1) / mm.nxb
		xb += (q8MaxRows - xb%q8MaxRows) % q8MaxRows
	}
	mm.xb = xb
	nwb := (w.Rows + p.rowBlock - 1) / p.rowBlock
	if p.serial {
		mm.runTasks(0, nwb*mm.nxb)
	} else {
		mm.pool.ForTasks(nwb*mm.nxb, mm.task)
	}
	mm.dst, mm.x, mm.w, mm.pack = nil, nil, nil, nil
}

// plan returns the plan for key: from a small direct-mapped cache in front
// of the map, since a decode step looks up a few dozen plans and hashing
// the key costs more than the lookup it saves.
func (mm *MatMul) plan(key planKey) plan {
	h := uint(key.rows)*0x9e3779b1 ^ uint(key.cols)*0x85ebca6b ^ uint(key.bucket)*0xc2b2ae35 ^ uint(key.t)
	e := &mm.recent[(h^h>>15)%uint(len(mm.recent))]
	if e.ok && e.key == key {
		return e.p
	}
	p, ok := mm.plans[key]
	if !ok {
		p = choosePlan(key, mm.pool.Threads())
		mm.plans[key] = p
	}
	e.key, e.p, e.ok = key, p, true
	return p
}

// quantize fills the activation scratch for the current call.
func (mm *MatMul) quantize() {
	M, K := mm.m, mm.cols
	switch mm.actKind() {
	case actQ8:
		if cap(mm.aq) < M*K {
			mm.aq = make([]int8, M*K)
			mm.ad = make([]float32, M*K/qk8)
		}
		mm.aq, mm.ad = mm.aq[:M*K], mm.ad[:M*K/qk8]
		if mm.pack != nil {
			if cap(mm.am) < M*K/qk8 {
				mm.am = make([]q8Meta, M*K/qk8)
			}
			mm.am = mm.am[:M*K/qk8]
		}
	case actQ4:
		if cap(mm.ap) < M*q4Pairs(K) {
			mm.ap = make([]pairQ4, M*q4Pairs(K))
		}
		mm.ap = mm.ap[:M*q4Pairs(K)]
	case actQ8K:
		if cap(mm.akb) < M*K/qkK {
			mm.akb = make([]blockQ8K, M*K/qkK)
		}
		mm.akb = mm.akb[:M*K/qkK]
	default:
		return
	}
	if M >= 8 && !mm.p.serial {
		mm.pool.For(M, mm.quantTask)
	} else {
		mm.quantRows(0, M)
	}
}

func (mm *MatMul) quantRows(lo, hi int) {
	K := mm.cols
	for m := lo; m < hi; m++ {
		x := mm.x[m*K : (m+1)*K]
		switch mm.actKind() {
		case actQ8:
			quantizeQ8_0(x, mm.aq[m*K:(m+1)*K], mm.ad[m*K/qk8:(m+1)*K/qk8])
			if mm.pack != nil {
				q8Metas(mm.aq[m*K:(m+1)*K], mm.ad[m*K/qk8:(m+1)*K/qk8], mm.am[m*K/qk8:(m+1)*K/qk8], packBias(mm.t))
			}
		case actQ4:
			np := q4Pairs(K)
			quantizeQ4Pairs(x, mm.ap[m*np:(m+1)*np])
		case actQ8K:
			quantizeQ8K(x, mm.akb[m*K/qkK:(m+1)*K/qkK])
		}
	}
}

// runTasks runs tasks [lo, hi): task i covers weight block i / nxb and
// activation block i % nxb.
func (mm *MatMul) runTasks(lo, hi int) {
	xb := mm.xb
	for i := lo; i < hi; i++ {
		wb, ab := i/mm.nxb, i%mm.nxb
		r0 := wb * mm.p.rowBlock
		r1 := min(mm.rows, r0+mm.p.rowBlock)
		m0 := ab * xb
		m1 := min(mm.m, m0+xb)
		mm.tile(r0, r1, m0, m1)
	}
}

// tile computes dst rows m0..m1, columns r0..r1.
//
// Groups of four activation rows go through the wide kernels where the CPU
// has them, else the x4 kernels (float weights: 4×3 tiles); the rest go
// through kernels that take one activation row and a run of weight rows
// (or the single-row kernels). They sum each dot product in the same
// order, so that a row's result does not depend on the batch around it.
func (mm *MatMul) tile(r0, r1, m0, m1 int) {
	if mm.pack != nil {
		if mm.t == gpu.F32 {
			mm.tileF32(r0, r1, m0, m1)
		} else {
			mm.tilePacked(r0, r1, m0, m1)
		}
		return
	}
	m4 := m0
	if mm.p.x4 {
		m4 = m0 + (m1-m0)&^3
	}
	if m4 > m0 {
		r := r0
		if wr := mm.wr; wr > 0 {
			r = r0 + (r1-r0)/wr*wr
			mm.wide(r0, r, m0, m4)
		}
		mm.tile4(r, r1, m0, m4)
	}
	mm.rowsOf(r0, r1, m4, m1)
}

// tile4 computes dst rows m0..m4 (a multiple of 4), columns r0..r1, with the
// x4 kernels.
func (mm *MatMul) tile4(r0, r1, m0, m4 int) {
	if r0 >= r1 {
		return
	}
	var out [4]float32
	N, rb := mm.rows, mm.rb
	dst := mm.dst
	if isFloat(mm.t) {
		var o [12]float32
		r := r0
		for ; r+3 <= r1; r += 3 {
			for m := m0; m < m4; m += 4 {
				mm.dot4x3(r, m, &o)
				for i := 0; i < 4; i++ {
					d := dst[(m+i)*N+r : (m+i)*N+r+3]
					d[0], d[1], d[2] = o[3*i], o[3*i+1], o[3*i+2]
				}
			}
		}
		if r < r1 {
			mm.rowsOf(r, r1, m0, m4)
		}
		return
	}
	for r := r0; r < r1; r++ {
		wr := mm.w[r*rb : (r+1)*rb]
		for m := m0; m < m4; m += 4 {
			mm.dot4(wr, m, &out)
			dst[m*N+r] = out[0]
			dst[(m+1)*N+r] = out[1]
			dst[(m+2)*N+r] = out[2]
			dst[(m+3)*N+r] = out[3]
		}
	}
}

// rowsOf computes dst rows m0..m1, columns r0..r1, one activation row at a
// time against the run of weight rows.
func (mm *MatMul) rowsOf(r0, r1, m0, m1 int) {
	K, N, rb := mm.cols, mm.rows, mm.rb
	dst := mm.dst
	w := mm.w[r0*rb : r1*rb]
	for m := m0; m < m1; m++ {
		out := dst[m*N+r0 : m*N+r1]
		switch mm.t {
		case gpu.F32:
			DotRows(mm.x[m*K:(m+1)*K], f32s(w), K, 1, out)
		case gpu.F16:
			dotRowsF16(mm.x[m*K:(m+1)*K], u16s(w), K, out)
		case gpu.BF16:
			dotRowsBF16(mm.x[m*K:(m+1)*K], u16s(w), K, out)
		case gpu.Q8_0:
			dotQ8_0Rows(w, rb, mm.aq[m*K:], mm.ad[m*K/qk8:], K/qk8, out)
		case gpu.Q4_0:
			np := q4Pairs(K)
			dotQ4_0Rows(w, rb, mm.ap[m*np:(m+1)*np], K/qk8, out)
		default:
			for r := r0; r < r1; r++ {
				out[r-r0] = mm.dot1(mm.w[r*rb:(r+1)*rb], m)
			}
		}
	}
}

// dot1 is one dot product for the types that have no run-of-rows kernel.
func (mm *MatMul) dot1(wr []byte, m int) float32 {
	K := mm.cols
	switch mm.t {
	case gpu.Q4_K:
		return dotQ4_K(wr, mm.akb[m*K/qkK:], K/qkK)
	case gpu.Q6_K:
		return dotQ6_K(wr, mm.akb[m*K/qkK:], K/qkK)
	case gpu.Q4_1:
		return dotQ4_1(wr, mm.aq[m*K:], mm.ad[m*K/qk8:], K/qk8)
	case gpu.Q5_0:
		return dotQ5_0(wr, mm.aq[m*K:], mm.ad[m*K/qk8:], K/qk8)
	case gpu.Q5_1:
		return dotQ5_1(wr, mm.aq[m*K:], mm.ad[m*K/qk8:], K/qk8)
	case gpu.Q2_K:
		return dotQ2_K(wr, mm.akb[m*K/qkK:], K/qkK)
	case gpu.Q3_K:
		return dotQ3_K(wr, mm.akb[m*K/qkK:], K/qkK)
	case gpu.Q5_K:
		return dotQ5_K(wr, mm.akb[m*K/qkK:], K/qkK)
	}
	panic("kernels: unsupported type " + mm.t.String())
}

func isFloat(t gpu.DType) bool { return t == gpu.F32 || t == gpu.F16 || t == gpu.BF16 }

// dot4x3 computes the tile of activation rows m..m+3 by weight rows r..r+2
// of a float matrix.
func (mm *MatMul) dot4x3(r, m int, out *[12]float32) {
	K, rb := mm.cols, mm.rb
	wr := mm.w[r*rb : (r+3)*rb]
	x := mm.x[m*K:]
	switch mm.t {
	case gpu.F32:
		dotF32x4x3(x, K, f32s(wr), K, K, out)
	case gpu.F16:
		dotF16x4x3(x, K, u16s(wr), K, K, out)
	case gpu.BF16:
		dotBF16x4x3(x, K, u16s(wr), K, K, out)
	default:
		panic("kernels: unsupported type " + mm.t.String())
	}
}

// dot4 is the x4 product of the quantized types: one weight row against
// activation rows m..m+3.
func (mm *MatMul) dot4(wr []byte, m int, out *[4]float32) {
	K := mm.cols
	switch mm.t {
	case gpu.Q8_0:
		dotQ8_0x4(wr, mm.aq[m*K:], K, mm.ad[m*K/qk8:], K/qk8, K/qk8, out)
	case gpu.Q4_0:
		np := q4Pairs(K)
		dotQ4_0x4(wr, mm.ap[m*np:], np, K/qk8, out)
	case gpu.Q4_K:
		dotQ4_Kx4(wr, mm.akb[m*K/qkK:], K/qkK, K/qkK, out)
	case gpu.Q6_K:
		dotQ6_Kx4(wr, mm.akb[m*K/qkK:], K/qkK, K/qkK, out)
	case gpu.Q4_1:
		dotQ8x4(dotQ4_1, wr, mm.aq[m*K:], K, mm.ad[m*K/qk8:], K/qk8, K/qk8, out)
	case gpu.Q5_0:
		dotQ8x4(dotQ5_0, wr, mm.aq[m*K:], K, mm.ad[m*K/qk8:], K/qk8, K/qk8, out)
	case gpu.Q5_1:
		dotQ8x4(dotQ5_1, wr, mm.aq[m*K:], K, mm.ad[m*K/qk8:], K/qk8, K/qk8, out)
	case gpu.Q2_K:
		dotQ8Kx4(dotQ2_K, wr, mm.akb[m*K/qkK:], K/qkK, K/qkK, out)
	case gpu.Q3_K:
		dotQ3_Kx4(wr, mm.akb[m*K/qkK:], K/qkK, K/qkK, out)
	case gpu.Q5_K:
		dotQ5_Kx4(wr, mm.akb[m*K/qkK:], K/qkK, K/qkK, out)
	default:
		panic("kernels: unsupported type " + mm.t.String())
	}
}

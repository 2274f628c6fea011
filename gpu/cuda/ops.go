//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
)

// Threads per block of the row-wise and element-wise kernels.
const (
	rowThreads  = 256
	attnThreads = 128 // ATT_THREADS in attention.cu
	attnMaxHead = 256 // ATT_MAXHD
	mmThreads   = 256 // MM_THREADS in matmul.cu
	mmCols      = 8   // MM_COLS
)

func same(op string, a, b *tensor) {
	if a.rows != b.rows || a.cols != b.cols {
		panic(fmt.Sprintf("cuda: %s: shapes %d×%d and %d×%d", op, a.rows, a.cols, b.rows, b.cols))
	}
}

// Embed sets dst row i to row ids[i] of table, dequantized.
func (b *Backend) Embed(dst gpu.Tensor, table gpu.Matrix, ids []int32) {
	d, m := b.t(dst), b.m(table)
	if d.rows != len(ids) || d.cols != m.cols {
		panic(fmt.Sprintf("cuda: embed %d ids of width %d into %d×%d", len(ids), m.cols, d.rows, d.cols))
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.rows {
			panic(fmt.Sprintf("cuda: embed: token id %d out of range [0,%d)", id, m.rows))
		}
	}
	if len(ids) == 0 || m.cols == 0 {
		return
	}
	p := b.stage(&b.idsBuf, int32Bytes(ids))
	if p == 0 {
		return
	}
	b.launch(kEmbed, [3]uint32{uint32(len(ids)), 1, 1}, rowThreads,
		ptr(d.p), ptr(p), ptr(m.a[0]), ptr(m.a[1]), ptr(m.a[2]), ptr(m.a[3]), i32(int(m.t)), i32(m.rows), i32(m.cols), i32(m.kp))
}

// MatMul computes dst = x·wᵀ.
func (b *Backend) MatMul(dst, x gpu.Tensor, w gpu.Matrix) {
	d, xt, m := b.t(dst), b.t(x), b.m(w)
	if xt.cols != m.cols || d.cols != m.rows || d.rows != xt.rows {
		panic(fmt.Sprintf("cuda: matmul %d×%d · (%d×%d)ᵀ into %d×%d", xt.rows, xt.cols, m.rows, m.cols, d.rows, d.cols))
	}
	if d.rows == 0 || d.cols == 0 {
		return
	}
	k, tile := mmKernel(m.t, xt.rows)
	grid := [3]uint32{uint32((xt.rows + tile - 1) / tile), uint32((m.rows + mmCols - 1) / mmCols), 1}
	b.launch(k, grid, mmThreads,
		ptr(d.p), ptr(xt.p), ptr(m.a[0]), ptr(m.a[1]), ptr(m.a[2]), ptr(m.a[3]), i32(xt.rows), i32(m.rows), i32(m.cols), i32(m.kp))
}

// Add computes dst += x, broadcasting a one-row x.
func (b *Backend) Add(dst, x gpu.Tensor) {
	d, xt := b.t(dst), b.t(x)
	if xt.cols != d.cols || (xt.rows != d.rows && xt.rows != 1) {
		panic(fmt.Sprintf("cuda: add %d×%d to %d×%d", xt.rows, xt.cols, d.rows, d.cols))
	}
	n := d.rows * d.cols
	if n == 0 {
		return
	}
	bcast := 0
	if xt.rows != d.rows {
		bcast = 1
	}
	b.launch(kAdd, grid1(n, rowThreads), rowThreads, ptr(d.p), ptr(xt.p), i32(n), i32(d.cols), i32(bcast))
}

// RMSNorm normalises each row of x and scales it by w. dst may be x.
func (b *Backend) RMSNorm(dst, x, w gpu.Tensor, eps float32) {
	d, xt, wt := b.t(dst), b.t(x), b.t(w)
	same("rmsnorm", d, xt)
	if wt.cols != xt.cols || wt.rows != 1 {
		panic(fmt.Sprintf("cuda: rmsnorm weight %d×%d for width %d", wt.rows, wt.cols, xt.cols))
	}
	if xt.rows == 0 || xt.cols == 0 {
		return
	}
	b.launch(kRMSNorm, [3]uint32{uint32(xt.rows), 1, 1}, rowThreads, ptr(d.p), ptr(xt.p), ptr(wt.p), i32(xt.cols), f32(eps))
}

// ropeKey is the RoPE configuration whose frequencies are on the device.
type ropeKey struct {
	dims    int
	base    float32
	factors []float32
	p       dptr
}

func (k *ropeKey) matches(r gpu.RoPE) bool {
	if k.p == 0 || k.dims != r.Dims || k.base != r.Base || len(k.factors) != len(r.Factors) {
		return false
	}
	for i, f := range r.Factors {
		if math.Float32bits(f) != math.Float32bits(k.factors[i]) {
			return false
		}
	}
	return true
}

// RoPE rotates the first r.Dims dimensions of every head of x in place.
// Angles are computed in double precision on the device.
func (b *Backend) RoPE(x gpu.Tensor, heads int, bt *gpu.Batch, r gpu.RoPE) {
	xt := b.t(x)
	if heads <= 0 || xt.cols%heads != 0 || len(bt.Pos) != xt.rows {
		panic(fmt.Sprintf("cuda: rope on %d×%d with %d heads and %d positions", xt.rows, xt.cols, heads, len(bt.Pos)))
	}
	hd := xt.cols / heads
	if r.Dims <= 0 || r.Dims > hd || r.Dims%2 != 0 {
		panic(fmt.Sprintf("cuda: rope dims %d for head size %d", r.Dims, hd))
	}
	for _, p := range bt.Pos {
		if p < 0 {
			panic(fmt.Sprintf("cuda: rope at position %d", p))
		}
	}
	if xt.rows == 0 {
		return
	}
	slot := 0
	switch {
	case b.rope[0].matches(r):
	case b.rope[1].matches(r):
		slot = 1
	default:
		// Replace the slot not used last, so that two configurations
		// used in turn each keep theirs.
		slot = 1 - b.ropeLast
		inv := r.Freqs()
		p := b.stage(&b.ropeBuf[slot], unsafe.Slice((*byte)(unsafe.Pointer(&inv[0])), 8*len(inv)))
		if p == 0 {
			return
		}
		b.rope[slot] = ropeKey{dims: r.Dims, base: r.Base, factors: append([]float32(nil), r.Factors...), p: p}
	}
	b.ropeLast = slot
	meta, ok := b.stageBatch(bt)
	if !ok {
		return
	}
	scale := float64(r.Scale)
	if scale == 0 {
		scale = 1
	}
	neox := 0
	if r.NeoX {
		neox = 1
	}
	half := r.Dims / 2
	b.launch(kRoPE, grid1(xt.rows*heads*half, rowThreads), rowThreads,
		ptr(xt.p), ptr(meta.pos), ptr(b.rope[slot].p), i32(xt.rows), i32(heads), i32(hd), i32(half), f64(scale), i32(neox))
}

// checkBatch panics unless every row of bt has its block in kv's range.
// A row reads positions p−window+1..p (window ≤ 0: all of 0..p; StoreKV,
// which writes position p only, passes 1), and the table may hold −1
// before them.
func checkBatch(op string, cfg gpu.KVConfig, bt *gpu.Batch, rows, window int) {
	if len(bt.Pos) != rows || len(bt.Seq) != rows {
		panic(fmt.Sprintf("cuda: %s: %d rows with %d positions and %d sequence ids", op, rows, len(bt.Pos), len(bt.Seq)))
	}
	for i, p := range bt.Pos {
		s := int(bt.Seq[i])
		if p < 0 || s < 0 || s >= len(bt.Tables) || int(p)/cfg.BlockTokens >= len(bt.Tables[s]) {
			panic(fmt.Sprintf("cuda: %s: row %d (sequence %d, position %d) has no block", op, i, s, p))
		}
		lo := 0
		if window > 0 {
			lo = max(0, int(p)+1-window) / cfg.BlockTokens
		}
		for _, blk := range bt.Tables[s][lo : int(p)/cfg.BlockTokens+1] {
			if blk < 0 || int(blk) >= cfg.Blocks {
				panic(fmt.Sprintf("cuda: %s: block %d out of range [0,%d)", op, blk, cfg.Blocks))
			}
		}
	}
}

// StoreKV writes each row of k and v into its cache slot.
func (b *Backend) StoreKV(kvc gpu.KV, layer int, k, v gpu.Tensor, bt *gpu.Batch) {
	kv, kt, vt := b.kv(kvc), b.t(k), b.t(v)
	same("storekv", kt, vt)
	c := &kv.cfg
	if kt.cols != c.KVDim || layer < 0 || layer >= c.Layers {
		panic(fmt.Sprintf("cuda: storekv %d×%d into layer %d of kv dim %d", kt.rows, kt.cols, layer, c.KVDim))
	}
	checkBatch("storekv", *c, bt, kt.rows, 1)
	if kt.rows == 0 {
		return
	}
	meta, ok := b.stageBatch(bt)
	if !ok {
		return
	}
	b.launch(kStoreKV, grid1(kt.rows*c.KVDim, rowThreads), rowThreads,
		ptr(kv.p), ptr(kt.p), ptr(vt.p), ptr(meta.pos), ptr(meta.seq), ptr(meta.tabOff), ptr(meta.tabs),
		i32(kt.rows), i32(c.KVDim), i32(c.BlockTokens), i32(kv.bf), i32(layer*2*c.BlockTokens*c.KVDim))
}

// Attention computes causal grouped-query attention over the paged cache.
func (b *Backend) Attention(dst, q gpu.Tensor, kvc gpu.KV, layer, heads int, bt *gpu.Batch) {
	b.attention(dst, q, kvc, layer, heads, 0, bt)
}

// AttentionWindow is Attention where the row at position p attends only to
// the positions p0 with p − p0 < window (gpu.ArchOps); window ≤ 0 is
// Attention.
func (b *Backend) AttentionWindow(dst, q gpu.Tensor, kvc gpu.KV, layer, heads, window int, bt *gpu.Batch) {
	b.attention(dst, q, kvc, layer, heads, window, bt)
}

func (b *Backend) attention(dst, q gpu.Tensor, kvc gpu.KV, layer, heads, window int, bt *gpu.Batch) {
	d, qt, kv := b.t(dst), b.t(q), b.kv(kvc)
	same("attention", d, qt)
	c := &kv.cfg
	if heads <= 0 || qt.cols%heads != 0 || layer < 0 || layer >= c.Layers {
		panic(fmt.Sprintf("cuda: attention on %d×%d with %d heads at layer %d", qt.rows, qt.cols, heads, layer))
	}
	hd := qt.cols / heads
	if hd == 0 || c.KVDim%hd != 0 || heads%(c.KVDim/hd) != 0 {
		panic(fmt.Sprintf("cuda: attention: %d heads of %d do not group over kv dim %d", heads, hd, c.KVDim))
	}
	if hd > attnMaxHead {
		panic(fmt.Sprintf("cuda: attention: head size %d is larger than the kernel's %d", hd, attnMaxHead))
	}
	checkBatch("attention", *c, bt, qt.rows, window)
	if qt.rows == 0 {
		return
	}
	meta, ok := b.stageBatch(bt)
	if !ok {
		return
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	if window > 0 {
		b.launch(kAttentionWindow, [3]uint32{uint32(qt.rows), uint32(heads), 1}, attnThreads,
			ptr(d.p), ptr(qt.p), ptr(kv.p), ptr(meta.pos), ptr(meta.seq), ptr(meta.tabOff), ptr(meta.tabs),
			i32(heads), i32(hd), i32(c.KVDim/hd), i32(c.BlockTokens), i32(kv.bf), i32(layer*2*c.BlockTokens*c.KVDim), f32(scale), i32(window))
		return
	}
	b.launch(kAttention, [3]uint32{uint32(qt.rows), uint32(heads), 1}, attnThreads,
		ptr(d.p), ptr(qt.p), ptr(kv.p), ptr(meta.pos), ptr(meta.seq), ptr(meta.tabOff), ptr(meta.tabs),
		i32(heads), i32(hd), i32(c.KVDim/hd), i32(c.BlockTokens), i32(kv.bf), i32(layer*2*c.BlockTokens*c.KVDim), f32(scale))
}

// SwiGLU computes dst = silu(gate) ⊙ up. dst may be gate.
func (b *Backend) SwiGLU(dst, gate, up gpu.Tensor) {
	d, g, u := b.t(dst), b.t(gate), b.t(up)
	same("swiglu", d, g)
	same("swiglu", d, u)
	n := d.rows * d.cols
	if n == 0 {
		return
	}
	b.launch(kSwiGLU, grid1(n, rowThreads), rowThreads, ptr(d.p), ptr(g.p), ptr(u.p), i32(n))
}

// RMSNormHeads normalises each head of each row of x in place over the
// head width (gpu.ArchOps): the rmsnorm kernel over rows·heads rows of
// w.Cols().
func (b *Backend) RMSNormHeads(x gpu.Tensor, heads int, w gpu.Tensor, eps float32) {
	xt, wt := b.t(x), b.t(w)
	if heads <= 0 || xt.cols%heads != 0 || wt.rows != 1 || wt.cols != xt.cols/heads {
		panic(fmt.Sprintf("cuda: rmsnorm heads: %d×%d with %d heads and weight %d×%d", xt.rows, xt.cols, heads, wt.rows, wt.cols))
	}
	if xt.rows == 0 || wt.cols == 0 {
		return
	}
	b.launch(kRMSNorm, [3]uint32{uint32(xt.rows * heads), 1, 1}, rowThreads, ptr(xt.p), ptr(xt.p), ptr(wt.p), i32(wt.cols), f32(eps))
}

// GeGLU computes dst = gelu_tanh(gate) ⊙ up (gpu.ArchOps). dst may be
// gate.
func (b *Backend) GeGLU(dst, gate, up gpu.Tensor) {
	d, g, u := b.t(dst), b.t(gate), b.t(up)
	same("geglu", d, g)
	same("geglu", d, u)
	n := d.rows * d.cols
	if n == 0 {
		return
	}
	b.launch(kGeGLU, grid1(n, rowThreads), rowThreads, ptr(d.p), ptr(g.p), ptr(u.p), i32(n))
}

// Scale multiplies x by s in place (gpu.ArchOps).
func (b *Backend) Scale(x gpu.Tensor, s float32) {
	xt := b.t(x)
	n := xt.rows * xt.cols
	if n == 0 {
		return
	}
	b.launch(kScale, grid1(n, rowThreads), rowThreads, ptr(xt.p), f32(s), i32(n))
}

// ArchReady reports whether the gpu.ArchOps kernels are loaded: they are
// missing from PTX generated before them (run make kernels).
func (b *Backend) ArchReady() error {
	if m := b.eng.missing; len(m) > 0 {
		return fmt.Errorf("cuda: the loaded PTX lacks the kernels %v, which qwen3 and gemma3 need (regenerate it with make kernels)", m)
	}
	return nil
}

// Softmax replaces each row of x by its softmax.
func (b *Backend) Softmax(x gpu.Tensor) {
	xt := b.t(x)
	if xt.rows == 0 || xt.cols == 0 {
		return
	}
	b.launch(kSoftmax, [3]uint32{uint32(xt.rows), 1, 1}, rowThreads, ptr(xt.p), i32(xt.cols))
}

// Gather sets dst row i to x row rows[i].
func (b *Backend) Gather(dst, x gpu.Tensor, rows []int32) {
	d, xt := b.t(dst), b.t(x)
	if d.rows != len(rows) || d.cols != xt.cols {
		panic(fmt.Sprintf("cuda: gather %d rows of width %d into %d×%d", len(rows), xt.cols, d.rows, d.cols))
	}
	for _, r := range rows {
		if r < 0 || int(r) >= xt.rows {
			panic(fmt.Sprintf("cuda: gather: row %d out of range [0,%d)", r, xt.rows))
		}
	}
	if len(rows) == 0 || d.cols == 0 {
		return
	}
	p := b.stage(&b.rowsBuf, int32Bytes(rows))
	if p == 0 {
		return
	}
	b.launch(kGather, [3]uint32{uint32(len(rows)), 1, 1}, rowThreads, ptr(d.p), ptr(xt.p), ptr(p), i32(d.cols))
}

// Argmax writes the index of the largest value of each row of x to out
// (len x.Rows()); ties go to the lowest index. It waits for the queued work,
// like Read, and only rows' indices cross to the host.
func (b *Backend) Argmax(x gpu.Tensor, out []int32) error {
	xt := b.t(x)
	if len(out) != xt.rows {
		return fmt.Errorf("%w: argmax of %d rows into %d", gpu.ErrShape, xt.rows, len(out))
	}
	if xt.rows == 0 {
		return nil
	}
	if xt.cols == 0 {
		clear(out)
		return nil
	}
	if need := int64(4 * xt.rows); need > b.outBuf.cap {
		p, err := b.alloc(max(need, 256), false)
		if err != nil {
			return err
		}
		b.release(b.outBuf.p)
		b.outBuf = staged{p: p, cap: max(need, 256)}
	}
	outp := b.outBuf.p
	b.launch(kArgmax, [3]uint32{uint32(xt.rows), 1, 1}, rowThreads, ptr(outp), ptr(xt.p), i32(xt.cols))
	if err := b.takeFailed(); err != nil {
		return err
	}
	return b.call(func() error {
		if err := b.eng.takeErr(); err != nil {
			return err
		}
		return b.eng.dev.download(unsafe.Pointer(&out[0]), outp, int64(4*len(out)))
	})
}

// MaskWords returns the number of 64-bit words of a logit mask row of n
// tokens: (n+63)/64, as the tools' packed bitsets.
func MaskWords(n int) int { return (n + 63) / 64 }

// MaskLogits sets x[r][i] to -Inf wherever bit i%64 of word i/64 of the
// row's mask is clear: the packed token bitset of the tools (constrained
// decoding, banned words). mask holds MaskWords(x.Cols()) words, applied to
// every row, or that many per row when perRow is set. The kernel reads the
// words as pairs of little-endian 32-bit halves.
func (b *Backend) MaskLogits(x gpu.Tensor, mask []uint64, perRow bool) {
	xt := b.t(x)
	words := MaskWords(xt.cols)
	want, stride := words, 0
	if perRow {
		want, stride = words*xt.rows, 2*words
	}
	if len(mask) != want {
		panic(fmt.Sprintf("cuda: mask of %d words for %d×%d logits (want %d)", len(mask), xt.rows, xt.cols, want))
	}
	n := xt.rows * xt.cols
	if n == 0 {
		return
	}
	p := b.stage(&b.maskBuf, unsafe.Slice((*byte)(unsafe.Pointer(&mask[0])), 8*len(mask)))
	if p == 0 {
		return
	}
	b.launch(kMaskLogits, grid1(n, rowThreads), rowThreads, ptr(xt.p), ptr(p), i32(xt.rows), i32(xt.cols), i32(stride))
}

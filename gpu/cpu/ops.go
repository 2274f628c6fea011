package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// Embed copies (dequantizing) rows of the table.
func (b *Backend) Embed(dst gpu.Tensor, table gpu.Matrix, ids []int32) {
	d, m := dst.(*tensor), table.(*matrix)
	if d.rows != len(ids) || d.cols != m.w.Cols {
		panic(fmt.Sprintf("cpu: embed %d ids of width %d into %d×%d", len(ids), m.w.Cols, d.rows, d.cols))
	}
	for i, id := range ids {
		if id < 0 || int(id) >= m.w.Rows {
			panic(fmt.Sprintf("cpu: embed: token id %d out of range [0,%d)", id, m.w.Rows))
		}
		kernels.DequantizeRow(&m.w, int(id), d.data[i*d.cols:(i+1)*d.cols])
	}
}

// MatMul computes dst = x·wᵀ.
func (b *Backend) MatMul(dst, x gpu.Tensor, w gpu.Matrix) {
	d, xt, m := dst.(*tensor), x.(*tensor), w.(*matrix)
	if xt.cols != m.w.Cols || d.cols != m.w.Rows || d.rows != xt.rows {
		panic(fmt.Sprintf("cpu: matmul %d×%d · (%d×%d)ᵀ into %d×%d", xt.rows, xt.cols, m.w.Rows, m.w.Cols, d.rows, d.cols))
	}
	b.mm.Run(d.data, xt.data, xt.rows, &m.w)
}

// MatMuls computes dst[i] = x·w[i]ᵀ, quantizing x once where the
// matrices take the same activations (gpu.MultiMatMuler).
func (b *Backend) MatMuls(dst []gpu.Tensor, x gpu.Tensor, w []gpu.Matrix) {
	if len(dst) != len(w) {
		panic(fmt.Sprintf("cpu: matmuls: %d outputs for %d matrices", len(dst), len(w)))
	}
	xt := x.(*tensor)
	for i := range w {
		d, m := dst[i].(*tensor), w[i].(*matrix)
		if xt.cols != m.w.Cols || d.cols != m.w.Rows || d.rows != xt.rows {
			panic(fmt.Sprintf("cpu: matmul %d×%d · (%d×%d)ᵀ into %d×%d", xt.rows, xt.cols, m.w.Rows, m.w.Cols, d.rows, d.cols))
		}
		b.mm.RunShared(d.data, xt.data, xt.rows, &m.w, i > 0)
	}
}

// Add computes dst += x, broadcasting a one-row x.
func (b *Backend) Add(dst, x gpu.Tensor) {
	d, xt := dst.(*tensor), x.(*tensor)
	if xt.cols != d.cols || (xt.rows != d.rows && xt.rows != 1) {
		panic(fmt.Sprintf("cpu: add %d×%d to %d×%d", xt.rows, xt.cols, d.rows, d.cols))
	}
	if xt.rows == d.rows {
		add := func(d, x []float32) {
			for i, v := range x {
				d[i] += v
			}
		}
		if n := d.cols; b.serial(d.rows, n) {
			add(d.data, xt.data)
		} else {
			// A prompt's residual adds, on one thread, left the others
			// waiting.
			b.pool.For(d.rows, func(lo, hi int) { add(d.data[lo*n:hi*n], xt.data[lo*n:hi*n]) })
		}
		return
	}
	for r := 0; r < d.rows; r++ {
		row := d.data[r*d.cols : (r+1)*d.cols]
		for i, v := range xt.data {
			row[i] += v
		}
	}
}

// RMSNorm normalises each row and scales it by w.
func (b *Backend) RMSNorm(dst, x, w gpu.Tensor, eps float32) {
	d, xt, wt := dst.(*tensor), x.(*tensor), w.(*tensor)
	same("rmsnorm", d, xt)
	if wt.cols != xt.cols || wt.rows != 1 {
		panic(fmt.Sprintf("cpu: rmsnorm weight %d×%d for width %d", wt.rows, wt.cols, xt.cols))
	}
	n := xt.cols
	if b.serial(xt.rows, n) {
		rmsNormRows(d.data, xt.data, wt.data, n, eps)
		return
	}
	b.pool.For(xt.rows, func(lo, hi int) {
		rmsNormRows(d.data[lo*n:hi*n], xt.data[lo*n:hi*n], wt.data, n, eps)
	})
}

func rmsNormRows(dst, x, w []float32, n int, eps float32) {
	w = w[:n]
	for r := 0; r+n <= len(x); r += n {
		src, out := x[r:r+n], dst[r:r+n]
		ss := kernels.Dot(src, src)
		scale := float32(1 / math.Sqrt(float64(ss/float32(n)+eps)))
		for i, v := range src {
			out[i] = w[i] * (scale * v)
		}
	}
}

// serial reports whether a row-wise operation is too small to pay for a
// hand-off to the pool.
func (b *Backend) serial(rows, cols int) bool {
	return rows*cols < 1<<15 || rows == 1 || b.cfg.Threads == 1
}

// ropeCache keeps the cosines and sines of the positions seen so far for
// one RoPE configuration: cs[(p·half + j)·2 : +2] = cos, sin of p·θ_j.
type ropeCache struct {
	dims    int
	base    float32
	scale   float32
	factors []float32
	inv     []float64
	cs      []float32
}

// ropeCacheFloats bounds the table; positions past it are computed per
// call.
const ropeCacheFloats = 4 << 20

func (c *ropeCache) matches(r gpu.RoPE) bool {
	if c.inv == nil || c.dims != r.Dims || c.base != r.Base || c.scale != r.Scale || len(c.factors) != len(r.Factors) {
		return false
	}
	for i, f := range r.Factors {
		if math.Float32bits(f) != math.Float32bits(c.factors[i]) {
			return false
		}
	}
	return true
}

// table returns the cached cosines and sines for positions 0..maxPos, or
// nil when they would not fit.
func (c *ropeCache) table(r gpu.RoPE, maxPos int32) []float32 {
	if !c.matches(r) {
		*c = ropeCache{dims: r.Dims, base: r.Base, scale: r.Scale, factors: append([]float32(nil), r.Factors...), inv: r.Freqs()}
	}
	half := r.Dims / 2
	need := (int(maxPos) + 1) * 2 * half
	if need > ropeCacheFloats {
		return nil
	}
	for p := len(c.cs) / (2 * half); p <= int(maxPos); p++ {
		c.cs = ropeAngles(c.cs, p, r.Scale, c.inv)
	}
	return c.cs
}

// ropeAngles appends the cosines and sines of position p.
func ropeAngles(cs []float32, p int, scale float32, inv []float64) []float32 {
	s64 := float64(scale)
	if s64 == 0 {
		s64 = 1
	}
	x := float64(p) * s64
	for _, f := range inv {
		s, c := math.Sincos(x * f)
		cs = append(cs, float32(c), float32(s))
	}
	return cs
}

// RoPE rotates the first r.Dims dimensions of every head in place.
func (b *Backend) RoPE(x gpu.Tensor, heads int, bt *gpu.Batch, r gpu.RoPE) {
	xt := x.(*tensor)
	if heads <= 0 || xt.cols%heads != 0 || len(bt.Pos) != xt.rows {
		panic(fmt.Sprintf("cpu: rope on %d×%d with %d heads and %d positions", xt.rows, xt.cols, heads, len(bt.Pos)))
	}
	hd := xt.cols / heads
	if r.Dims <= 0 || r.Dims > hd || r.Dims%2 != 0 {
		panic(fmt.Sprintf("cpu: rope dims %d for head size %d", r.Dims, hd))
	}
	maxPos := int32(0)
	for _, p := range bt.Pos {
		if p < 0 {
			panic(fmt.Sprintf("cpu: rope at position %d", p))
		}
		maxPos = max(maxPos, p)
	}
	// Two tables: a model may alternate two configurations (gemma3's local
	// and global layers); the one not matching is replaced.
	rc := &b.rope[0]
	if !rc.matches(r) {
		if b.rope[1].matches(r) || b.rope[0].matches(b.ropeLast) {
			rc = &b.rope[1]
		}
	}
	b.ropeLast = r
	tab := rc.table(r, maxPos)
	if b.serial(xt.rows, xt.cols) {
		b.ropeRows(xt, heads, bt, r, rc, tab, 0, xt.rows)
		return
	}
	b.pool.For(xt.rows, func(lo, hi int) { b.ropeRows(xt, heads, bt, r, rc, tab, lo, hi) })
}

func (b *Backend) ropeRows(xt *tensor, heads int, bt *gpu.Batch, r gpu.RoPE, rc *ropeCache, tab []float32, lo, hi int) {
	hd := xt.cols / heads
	half := r.Dims / 2
	var buf []float32
	for i := lo; i < hi; i++ {
		var cs []float32
		if tab != nil {
			p := int(bt.Pos[i])
			cs = tab[p*2*half : (p+1)*2*half]
		} else {
			buf = ropeAngles(buf[:0], int(bt.Pos[i]), r.Scale, rc.inv)
			cs = buf
		}
		row := xt.data[i*xt.cols : (i+1)*xt.cols]
		for h := 0; h < heads; h++ {
			v := row[h*hd : h*hd+hd]
			if r.NeoX {
				for j := 0; j < half; j++ {
					c, s := cs[2*j], cs[2*j+1]
					x0, x1 := v[j], v[j+half]
					v[j] = x0*c - x1*s
					v[j+half] = x0*s + x1*c
				}
				continue
			}
			for j := 0; j < half; j++ {
				c, s := cs[2*j], cs[2*j+1]
				x0, x1 := v[2*j], v[2*j+1]
				v[2*j] = x0*c - x1*s
				v[2*j+1] = x0*s + x1*c
			}
		}
	}
}

// kvSlot returns the value offset of (layer, position) of sequence s: the
// start of the layer's region in the position's block, and the position's
// slot in the block.
func kvSlot(kv *kvArena, bt *gpu.Batch, s int, layer int, pos int32) (base, slot int) {
	c := &kv.cfg
	tab := bt.Tables[s]
	bi := int(pos) / c.BlockTokens
	if bi >= len(tab) {
		panic(fmt.Sprintf("cpu: position %d of sequence %d is past its %d blocks", pos, s, len(tab)))
	}
	blk := int(tab[bi])
	if blk < 0 || blk >= c.Blocks {
		panic(fmt.Sprintf("cpu: block %d out of range [0,%d)", blk, c.Blocks))
	}
	return blk*kv.be + layer*kv.le, int(pos) % c.BlockTokens
}

// half returns the backend's scratch row of n binary16 values.
func (b *Backend) half(n int) []uint16 {
	if cap(b.halfRow) < n {
		b.halfRow = make([]uint16, n)
	}
	return b.halfRow[:n]
}

// StoreKV writes k and v rows into their cache slots: a K row as a column
// of the block's transposed K, a V row as a row, converted to the arena's
// type.
func (b *Backend) StoreKV(kvc gpu.KV, layer int, k, v gpu.Tensor, bt *gpu.Batch) {
	kv, kt, vt := kvc.(*kvArena), k.(*tensor), v.(*tensor)
	same("storekv", kt, vt)
	c := &kv.cfg
	if kt.cols != c.KVDim || len(bt.Pos) != kt.rows || layer < 0 || layer >= c.Layers {
		panic(fmt.Sprintf("cpu: storekv %d×%d into layer %d of kv dim %d", kt.rows, kt.cols, layer, c.KVDim))
	}
	n, btk, hd := c.KVDim, c.BlockTokens, c.HeadDim
	for i := 0; i < kt.rows; i++ {
		base, j := kvSlot(kv, bt, int(bt.Seq[i]), layer, bt.Pos[i])
		kr, vr := kt.data[i*n:(i+1)*n], vt.data[i*n:(i+1)*n]
		vo := base + btk*n + j*hd // head g's row j at vo + g·hd·btk
		if kv.q8 != nil {
			b.storeQ8(kv, base, j, kr, vr)
			continue
		}
		if kv.f16 != nil {
			kh := b.half(n)
			kernels.ToHalf(kh, kr)
			ks := kv.f16[base+j : base+(n-1)*btk+j+1]
			for cc, x := range kh {
				ks[cc*btk] = x
			}
			for g := 0; g < n; g += hd {
				o := vo + g*btk
				kernels.ToHalf(kv.f16[o:o+hd], vr[g:g+hd])
			}
			continue
		}
		ks := kv.f32[base+j : base+(n-1)*btk+j+1]
		for cc, x := range kr {
			ks[cc*btk] = x
		}
		for g := 0; g < n; g += hd {
			o := vo + g*btk
			copy(kv.f32[o:o+hd], vr[g:g+hd])
		}
	}
}

// storeQ8 writes one position's K and V rows (slot j of the layer's
// region at base) into a Q8_0 arena, quantized per 32 values of a head.
func (b *Backend) storeQ8(kv *kvArena, base, j int, kr, vr []float32) {
	c := &kv.cfg
	n, btk, hd := c.KVDim, c.BlockTokens, c.HeadDim
	if cap(b.q8Row) < n {
		b.q8Row, b.q8Scale = make([]int8, n), make([]float32, n/32)
	}
	qs, d := b.q8Row[:n], b.q8Scale[:n/32]
	region := btk * n
	kernels.QuantizeQ8_0(kr, qs, d)
	ks := kv.q8[base:]
	for cc, x := range qs {
		ks[cc*btk+j] = byte(x)
	}
	for ch, s := range d { // chunk ch of the row: head ch/(hd/32)'s
		binary.LittleEndian.PutUint16(ks[region+2*(ch*btk+j):], quant.Float32ToFP16(s))
	}
	kernels.QuantizeQ8_0(vr, qs, d)
	vs := kv.q8[base+q8Bytes(region):]
	per := hd / 32
	for g := 0; g < n; g += hd {
		row := vs[g*btk+j*hd:]
		for i, x := range qs[g : g+hd] {
			row[i] = byte(x)
		}
		sc := vs[region+2*(g/hd*btk*per+j*per):]
		for ch, s := range d[g/32 : g/32+per] {
			binary.LittleEndian.PutUint16(sc[2*ch:], quant.Float32ToFP16(s))
		}
	}
}

// RMSNormHeads normalises each head of each row of x in place by its own
// rms over the head width and scales it by w (1 × head width).
func (b *Backend) RMSNormHeads(x gpu.Tensor, heads int, w gpu.Tensor, eps float32) {
	xt, wt := x.(*tensor), w.(*tensor)
	if heads <= 0 || xt.cols%heads != 0 || wt.rows != 1 || wt.cols != xt.cols/heads {
		panic(fmt.Sprintf("cpu: rmsnorm heads: %d×%d with %d heads and weight %d×%d", xt.rows, xt.cols, heads, wt.rows, wt.cols))
	}
	n, c := wt.cols, xt.cols
	if b.serial(xt.rows, c) {
		rmsNormRows(xt.data, xt.data, wt.data, n, eps)
		return
	}
	b.pool.For(xt.rows, func(lo, hi int) {
		rmsNormRows(xt.data[lo*c:hi*c], xt.data[lo*c:hi*c], wt.data, n, eps)
	})
}

// ArchReady returns nil: the CPU backend runs every gpu.ArchOps operation.
func (b *Backend) ArchReady() error { return nil }

// Scale multiplies x by s in place.
func (b *Backend) Scale(x gpu.Tensor, s float32) {
	kernels.Scale(x.(*tensor).data, s)
}

// GeGLU computes gelu_tanh(gate) ⊙ up.
func (b *Backend) GeGLU(dst, gate, up gpu.Tensor) {
	d, g, u := dst.(*tensor), gate.(*tensor), up.(*tensor)
	same("geglu", d, g)
	same("geglu", d, u)
	if b.serial(d.rows, d.cols) {
		geluMul(d.data, g.data, u.data)
		return
	}
	c := d.cols
	b.pool.For(d.rows, func(lo, hi int) {
		geluMul(d.data[lo*c:hi*c], g.data[lo*c:hi*c], u.data[lo*c:hi*c])
	})
}

// geluMul sets dst[i] = gelu_tanh(g[i])·u[i], the tanh approximation
// evaluated in float64.
func geluMul(dst, g, u []float32) {
	const k = 0.7978845608028654 // √(2/π)
	u = u[:len(g)]
	dst = dst[:len(g)]
	for i, x := range g {
		x64 := float64(x)
		dst[i] = float32(0.5*x64*(1+math.Tanh(k*(x64+0.044715*x64*x64*x64)))) * u[i]
	}
}

// SwiGLU computes silu(gate) ⊙ up.
func (b *Backend) SwiGLU(dst, gate, up gpu.Tensor) {
	d, g, u := dst.(*tensor), gate.(*tensor), up.(*tensor)
	same("swiglu", d, g)
	same("swiglu", d, u)
	if b.serial(d.rows, d.cols) {
		kernels.SiLUMul(d.data, g.data, u.data)
		return
	}
	c := d.cols
	b.pool.For(d.rows, func(lo, hi int) {
		kernels.SiLUMul(d.data[lo*c:hi*c], g.data[lo*c:hi*c], u.data[lo*c:hi*c])
	})
}

// Softmax normalises each row in place.
func (b *Backend) Softmax(x gpu.Tensor) {
	xt := x.(*tensor)
	for r := 0; r < xt.rows; r++ {
		softmax(xt.data[r*xt.cols : (r+1)*xt.cols])
	}
}

func softmax(v []float32) {
	if len(v) == 0 {
		return
	}
	mx := v[0]
	for _, x := range v {
		mx = max(mx, x)
	}
	var sum float64
	for i, x := range v {
		e := math.Exp(float64(x - mx))
		v[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range v {
		v[i] *= inv
	}
}

// Gather copies the selected rows of x into dst.
func (b *Backend) Gather(dst, x gpu.Tensor, rows []int32) {
	d, xt := dst.(*tensor), x.(*tensor)
	if d.rows != len(rows) || d.cols != xt.cols {
		panic(fmt.Sprintf("cpu: gather %d rows of width %d into %d×%d", len(rows), xt.cols, d.rows, d.cols))
	}
	for i, r := range rows {
		copy(d.data[i*d.cols:(i+1)*d.cols], xt.data[int(r)*xt.cols:(int(r)+1)*xt.cols])
	}
}

package cpu

import (
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
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

// Add computes dst += x, broadcasting a one-row x.
func (b *Backend) Add(dst, x gpu.Tensor) {
	d, xt := dst.(*tensor), x.(*tensor)
	if xt.cols != d.cols || (xt.rows != d.rows && xt.rows != 1) {
		panic(fmt.Sprintf("cpu: add %d×%d to %d×%d", xt.rows, xt.cols, d.rows, d.cols))
	}
	if xt.rows == d.rows {
		for i, v := range xt.data {
			d.data[i] += v
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
	b.rows(xt.rows, n, func(r int) {
		src, out := xt.data[r*n:(r+1)*n], d.data[r*n:(r+1)*n]
		var ss float32
		for _, v := range src {
			ss += v * v
		}
		scale := float32(1 / math.Sqrt(float64(ss/float32(n)+eps)))
		for i, v := range src {
			out[i] = wt.data[i] * (scale * v)
		}
	})
}

// rows runs fn for every row, in parallel when the work is large enough to
// pay for the hand-off.
func (b *Backend) rows(rows, cols int, fn func(r int)) {
	if rows*cols < 1<<14 || rows == 1 {
		for r := 0; r < rows; r++ {
			fn(r)
		}
		return
	}
	b.pool.For(rows, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			fn(r)
		}
	})
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
	half := r.Dims / 2
	inv := ropeFreqs(r)
	scale := float64(r.Scale)
	if scale == 0 {
		scale = 1
	}
	b.rows(xt.rows, xt.cols, func(i int) {
		var buf [256]float32
		cs := buf[:]
		if 2*half > len(buf) {
			cs = make([]float32, 2*half)
		}
		p := float64(bt.Pos[i]) * scale
		for j := 0; j < half; j++ {
			s, c := math.Sincos(p * inv[j])
			cs[2*j], cs[2*j+1] = float32(c), float32(s)
		}
		row := xt.data[i*xt.cols : (i+1)*xt.cols]
		for h := 0; h < heads; h++ {
			v := row[h*hd : h*hd+hd]
			for j := 0; j < half; j++ {
				c, s := cs[2*j], cs[2*j+1]
				a, bb := 2*j, 2*j+1
				if r.NeoX {
					a, bb = j, j+half
				}
				x0, x1 := v[a], v[bb]
				v[a] = x0*c - x1*s
				v[bb] = x0*s + x1*c
			}
		}
	})
}

// ropeFreqs returns the angular frequency of each rotated pair.
func ropeFreqs(r gpu.RoPE) []float64 {
	half := r.Dims / 2
	inv := make([]float64, half)
	for j := range inv {
		inv[j] = 1 / math.Pow(float64(r.Base), float64(2*j)/float64(r.Dims))
		if len(r.Factors) == half && r.Factors[j] != 0 {
			inv[j] /= float64(r.Factors[j])
		}
	}
	return inv
}

// kvSlot returns the float offset of K for (layer, position) of sequence s;
// V follows BlockTokens×KVDim floats later.
func kvSlot(kv *kvArena, bt *gpu.Batch, s int, layer int, pos int32) int {
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
	return blk*kv.bf + layer*2*c.BlockTokens*c.KVDim + (int(pos)%c.BlockTokens)*c.KVDim
}

// StoreKV writes k and v rows into their cache slots.
func (b *Backend) StoreKV(kvc gpu.KV, layer int, k, v gpu.Tensor, bt *gpu.Batch) {
	kv, kt, vt := kvc.(*kvArena), k.(*tensor), v.(*tensor)
	same("storekv", kt, vt)
	c := &kv.cfg
	if kt.cols != c.KVDim || len(bt.Pos) != kt.rows || layer < 0 || layer >= c.Layers {
		panic(fmt.Sprintf("cpu: storekv %d×%d into layer %d of kv dim %d", kt.rows, kt.cols, layer, c.KVDim))
	}
	vOff := c.BlockTokens * c.KVDim
	for i := 0; i < kt.rows; i++ {
		o := kvSlot(kv, bt, int(bt.Seq[i]), layer, bt.Pos[i])
		copy(kv.data[o:o+c.KVDim], kt.data[i*c.KVDim:(i+1)*c.KVDim])
		copy(kv.data[o+vOff:o+vOff+c.KVDim], vt.data[i*c.KVDim:(i+1)*c.KVDim])
	}
}

// SwiGLU computes silu(gate) ⊙ up.
func (b *Backend) SwiGLU(dst, gate, up gpu.Tensor) {
	d, g, u := dst.(*tensor), gate.(*tensor), up.(*tensor)
	same("swiglu", d, g)
	same("swiglu", d, u)
	b.rows(d.rows, d.cols, func(r int) {
		lo, hi := r*d.cols, (r+1)*d.cols
		gr, ur, dr := g.data[lo:hi], u.data[lo:hi], d.data[lo:hi]
		for i, x := range gr {
			dr[i] = x / (1 + float32(math.Exp(float64(-x)))) * ur[i]
		}
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

package kernels

//go:generate go run ./attngen

import (
	"fmt"
	"unsafe"
)

// TileBT is the block size, in positions, of the fast tile kernels: a
// block's K rows for one kv head are stored transposed, hd rows of TileBT
// keys, one 512-bit register each.
const TileBT = 16

// KVRows locates one kv head's K or V values of a sequence in the CPU
// backend's paged arena, whose values are F32 or F16 (exactly one of the
// two slices is set). Block i of the sequence starts at value
// Tab[i]·BlockElems. In a block, this head's K region starts at Off and
// holds hd rows of BT keys (transposed: row d holds component d of each
// key); its V region starts at Off and holds BT rows of hd values, Stride
// values apart.
//
// A Q8_0 arena (Q8 set; its values are bytes) holds int8 values in the
// same places, and each value's float16 scale, one per 32 of a head's
// components, at SOff bytes from the region: K's as hd/32 rows of BT
// scales, V's as SStride bytes a row (hd/32 scales).
type KVRows struct {
	F32        []float32
	F16        []uint16
	Q8         []byte
	Tab        []int32
	BlockElems int
	Off        int
	BT         int
	Stride     int
	SOff       int
	SStride    int
}

func (r *KVRows) n() int {
	switch {
	case r.Q8 != nil:
		return len(r.Q8)
	case r.F16 != nil:
		return len(r.F16)
	}
	return len(r.F32)
}

// q8Scale returns the float16 scale of a Q8_0 region's value: K (v false)
// component d of key j, or V component d of row j, in the block at base.
func (r *KVRows) q8Scale(base, d, j int, v bool) float32 {
	o := base + r.Off + r.SOff + 2*((d/32)*r.BT+j)
	if v {
		o = base + r.Off + r.SOff + j*r.SStride + 2*(d/32)
	}
	return f16Table[uint16(r.Q8[o])|uint16(r.Q8[o+1])<<8]
}

// check panics unless blocks 0..nb-1 of r have span values from Off inside
// the arena.
func (r *KVRows) check(nb, span int) {
	if nb > len(r.Tab) || r.BT <= 0 || r.Off < 0 {
		panic(fmt.Sprintf("kernels: kv rows: %d blocks of %d, table of %d", nb, r.BT, len(r.Tab)))
	}
	for _, b := range r.Tab[:nb] {
		if b < 0 || int(b)*r.BlockElems+r.Off+span > r.n() {
			panic(fmt.Sprintf("kernels: kv rows: block %d outside %d values", b, r.n()))
		}
	}
}

// at returns the address of value i of the arena and its size in bytes.
func (r *KVRows) at(i int) (unsafe.Pointer, int) {
	if r.Q8 != nil {
		return unsafe.Pointer(&r.Q8[i]), 1
	}
	if r.F16 != nil {
		return unsafe.Pointer(&r.F16[i]), 2
	}
	return unsafe.Pointer(&r.F32[i]), 4
}

// tileAsm reports whether the tile kernels run for blocks of bt: the
// AVX-512 ones (wideOn) or their AVX2 twins, which compute the same bits.
func tileAsm(bt int) bool { return bt == TileBT && useAsm }

// AttnQK sets out[h·ostride + i·BT + j] = scale · q_h·K_{i,j} for the nq
// query heads q_h = q[h·hd : (h+1)·hd], the nb blocks i of k (K regions)
// and every key j of each block. Each score is one multiply-add chain over
// the head's components in order, whichever heads and blocks it is
// computed with.
func AttnQK(q []float32, nq, hd int, k *KVRows, nb int, scale float32, out []float32, ostride int) {
	if nq <= 0 || nb <= 0 {
		return
	}
	k.check(nb, hd*k.BT)
	_, _ = q[nq*hd-1], out[(nq-1)*ostride+nb*k.BT-1]
	if k.Q8 != nil {
		k.check(nb, k.SOff+hd/32*k.BT*2)
		if tileAsm(k.BT) && wideOn() && hd%32 == 0 {
			attnQKQ8(q, nq, hd, k, nb, scale, out, ostride)
		} else {
			attnQKGo(q, nq, hd, k, nb, scale, out, ostride)
		}
		return
	}
	if !tileAsm(k.BT) {
		attnQKGo(q, nq, hd, k, nb, scale, out, ostride)
		return
	}
	base, size := k.at(k.Off)
	f16, wide := k.F16 != nil, wideOn()
	bb := k.BlockElems * size
	w := 2 // heads and blocks per call
	if wide {
		w = 4
	}
	for i := 0; i < nb; {
		step := 1
		if nb-i >= w {
			step = w
		}
		h := 0
		for ; h+w <= nq; h += w {
			qkCall(wide, f16, w, step, &q[h*hd], 4*hd, base, &k.Tab[i], bb, hd, &out[h*ostride+i*k.BT], 4*ostride, scale)
		}
		for ; h < nq; h++ {
			qkCall(wide, f16, 1, step, &q[h*hd], 4*hd, base, &k.Tab[i], bb, hd, &out[h*ostride+i*k.BT], 4*ostride, scale)
		}
		i += step
	}
}

func attnQKGo(q []float32, nq, hd int, k *KVRows, nb int, scale float32, out []float32, ostride int) {
	bt := k.BT
	for i := 0; i < nb; i++ {
		base := int(k.Tab[i])*k.BlockElems + k.Off
		for h := 0; h < nq; h++ {
			o := out[h*ostride+i*bt : h*ostride+(i+1)*bt]
			clear(o)
			for d, x := range q[h*hd : (h+1)*hd] {
				r := base + d*bt
				if k.Q8 != nil {
					for j, y := range k.Q8[r : r+bt] {
						o[j] += x * (float32(int8(y)) * k.q8Scale(int(k.Tab[i])*k.BlockElems, d, j, false))
					}
					continue
				}
				if k.F16 != nil {
					for j, y := range k.F16[r : r+bt] {
						o[j] += x * f16Table[y]
					}
					continue
				}
				for j, y := range k.F32[r : r+bt] {
					o[j] += x * y
				}
			}
			for j := range o {
				o[j] *= scale
			}
		}
	}
}

// AttnPV adds Σ_t p[h·pstride + t]·V_t to out[h·ostride : h·ostride+hd]
// for the nq heads h and the first cnt positions t of v's blocks (V
// regions). Each output is one multiply-add chain over the positions in
// order, from out's value, whichever heads it is computed with.
func AttnPV(p []float32, pstride, nq, hd int, v *KVRows, cnt int, out []float32, ostride int) {
	if nq <= 0 || cnt <= 0 {
		return
	}
	bt := v.BT
	nb := (cnt + bt - 1) / bt
	v.check(nb, (bt-1)*v.Stride+hd)
	_, _ = p[(nq-1)*pstride+cnt-1], out[(nq-1)*ostride+hd-1]
	if v.Q8 != nil {
		v.check(nb, v.SOff+(bt-1)*v.SStride+hd/32*2)
		if tileAsm(bt) && wideOn() && hd%64 == 0 {
			attnPVQ8(p, pstride, nq, hd, v, cnt, out, ostride)
		} else {
			attnPVGo(p, pstride, nq, hd, v, cnt, out, ostride)
		}
		return
	}
	// 64 columns a call with AVX-512 (four heads), 32 with AVX2 (two), 8
	// for small heads (four): the same bits.
	wide := wideOn() && hd%64 == 0
	if !tileAsm(bt) || hd%8 != 0 {
		attnPVGo(p, pstride, nq, hd, v, cnt, out, ostride)
		return
	}
	f16 := v.F16 != nil
	w, cols := 4, 8
	switch {
	case wide:
		w, cols = 4, 64
	case hd%32 == 0:
		w, cols = 2, 32
	}
	for i := 0; i < nb; i++ {
		rows := min(bt, cnt-i*bt)
		for c := 0; c < hd; c += cols {
			vp, size := v.at(int(v.Tab[i])*v.BlockElems + v.Off + c)
			h := 0
			for ; h+w <= nq; h += w {
				pvCall(cols, f16, w, &p[h*pstride+i*bt], 4*pstride, vp, size*v.Stride, rows, &out[h*ostride+c], 4*ostride)
			}
			for ; h < nq; h++ {
				pvCall(cols, f16, 1, &p[h*pstride+i*bt], 4*pstride, vp, size*v.Stride, rows, &out[h*ostride+c], 4*ostride)
			}
		}
	}
}

func attnPVGo(p []float32, pstride, nq, hd int, v *KVRows, cnt int, out []float32, ostride int) {
	bt := v.BT
	for t := 0; t < cnt; t++ {
		r := int(v.Tab[t/bt])*v.BlockElems + v.Off + (t%bt)*v.Stride
		for h := 0; h < nq; h++ {
			w := p[h*pstride+t]
			o := out[h*ostride : h*ostride+hd]
			if v.Q8 != nil {
				blk := int(v.Tab[t/bt]) * v.BlockElems
				for c, y := range v.Q8[r : r+hd] {
					o[c] += w * (float32(int8(y)) * v.q8Scale(blk, c, t%bt, true))
				}
				continue
			}
			if v.F16 != nil {
				for c, y := range v.F16[r : r+hd] {
					o[c] += w * f16Table[y]
				}
				continue
			}
			for c, y := range v.F32[r : r+hd] {
				o[c] += w * y
			}
		}
	}
}

// AttnPairs reports whether AttnQKPair and AttnPVPair run their own
// kernels for heads of hd over an F32 or F16 arena of blocks of bt: two
// kv heads of a decoding row in one call, eight multiply-add chains where
// one head has four (decode is bound by their latency). Elsewhere they
// run AttnQK and AttnPV once a head; the bits are the same either way. (A
// Q8_0 arena's pairs run the two-head PV kernel and the one-head QK ones:
// a two-head Q8_0 QK kernel would need more registers than there are.)
func AttnPairs(bt, hd int) bool { return tileAsm(bt) && wideOn() && hd%64 == 0 }

// AttnQKPair is AttnQK for two heads, q[:hd] and q[hd:2hd], scoring K
// regions of their own, k0 and k1 (the same blocks, another Off): the
// second head's scores ostride after the first's.
func AttnQKPair(q []float32, hd int, k0, k1 *KVRows, nb int, scale float32, out []float32, ostride int) {
	if nb <= 0 {
		return
	}
	if !samePair(k0, k1) || !AttnPairs(k0.BT, hd) || k0.Q8 != nil {
		AttnQK(q[:hd], 1, hd, k0, nb, scale, out, ostride)
		AttnQK(q[hd:2*hd], 1, hd, k1, nb, scale, out[ostride:], ostride)
		return
	}
	k0.check(nb, hd*k0.BT)
	k1.check(nb, hd*k1.BT)
	_, _ = q[2*hd-1], out[ostride+nb*k0.BT-1]
	base, size := k0.at(k0.Off)
	for i := 0; i < nb; {
		step := 1
		if nb-i >= 4 {
			step = 4
		}
		qkPairCall(k0.F16 != nil, step, &q[0], 4*hd, base, &k0.Tab[i], k0.BlockElems*size, hd, &out[i*k0.BT], 4*ostride, scale, (k1.Off-k0.Off)*size)
		i += step
	}
}

// AttnPVPair is AttnPV for two heads with V regions of their own: p's rows
// 0 and 1 (pstride apart) weight v0's and v1's rows into out's rows 0 and
// 1 (ostride apart).
func AttnPVPair(p []float32, pstride, hd int, v0, v1 *KVRows, cnt int, out []float32, ostride int) {
	if cnt <= 0 {
		return
	}
	if !samePair(v0, v1) || v0.Stride != v1.Stride || v0.SStride != v1.SStride || !AttnPairs(v0.BT, hd) {
		AttnPV(p, pstride, 1, hd, v0, cnt, out, ostride)
		AttnPV(p[pstride:], pstride, 1, hd, v1, cnt, out[ostride:], ostride)
		return
	}
	bt := v0.BT
	nb := (cnt + bt - 1) / bt
	v0.check(nb, (bt-1)*v0.Stride+hd)
	v1.check(nb, (bt-1)*v1.Stride+hd)
	if v0.Q8 != nil {
		v0.check(nb, v0.SOff+(bt-1)*v0.SStride+hd/32*2)
		v1.check(nb, v1.SOff+(bt-1)*v1.SStride+hd/32*2)
	}
	_, _ = p[pstride+cnt-1], out[ostride+hd-1]
	for i := 0; i < nb; i++ {
		rows := min(bt, cnt-i*bt)
		for c := 0; c < hd; c += 64 {
			vp, size := v0.at(int(v0.Tab[i])*v0.BlockElems + v0.Off + c)
			if v0.Q8 != nil {
				soff := v0.SOff + 2*(c/32) - c // as attnPVQ8
				vd := v1.Off - v0.Off
				pvQ8PairCall(&p[i*bt], 4*pstride, vp, v0.Stride, rows, &out[c], 4*ostride, soff, v0.SStride, vd, vd+v1.SOff-v0.SOff)
				continue
			}
			pvPairCall(v0.F16 != nil, &p[i*bt], 4*pstride, vp, size*v0.Stride, rows, &out[c], 4*ostride, (v1.Off-v0.Off)*size)
		}
	}
}

// samePair reports whether two heads' rows lie in the same arena and
// blocks, at other offsets.
func samePair(a, b *KVRows) bool {
	return (a.Q8 != nil) == (b.Q8 != nil) && (a.F16 != nil) == (b.F16 != nil) && a.BlockElems == b.BlockElems && a.BT == b.BT &&
		len(a.Tab) == len(b.Tab) && (len(a.Tab) == 0 || &a.Tab[0] == &b.Tab[0])
}

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
type KVRows struct {
	F32        []float32
	F16        []uint16
	Tab        []int32
	BlockElems int
	Off        int
	BT         int
	Stride     int
}

func (r *KVRows) n() int {
	if r.F16 != nil {
		return len(r.F16)
	}
	return len(r.F32)
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
	if r.F16 != nil {
		return unsafe.Pointer(&r.F16[i]), 2
	}
	return unsafe.Pointer(&r.F32[i]), 4
}

// val returns value i of the arena as a float32.
func (r *KVRows) val(i int) float32 {
	if r.F16 != nil {
		return f16Table[r.F16[i]]
	}
	return r.F32[i]
}

func tileFast(bt int) bool { return bt == TileBT && wideOn() }

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
	if !tileFast(k.BT) {
		attnQKGo(q, nq, hd, k, nb, scale, out, ostride)
		return
	}
	base, size := k.at(k.Off)
	_ = size
	f16 := k.F16 != nil
	bb := k.BlockElems * size
	for i := 0; i < nb; {
		step := 1
		if nb-i >= 4 {
			step = 4
		}
		h := 0
		for ; h+4 <= nq; h += 4 {
			qkCall(f16, 4, step, &q[h*hd], 4*hd, base, &k.Tab[i], bb, hd, &out[h*ostride+i*k.BT], 4*ostride, scale)
		}
		for ; h < nq; h++ {
			qkCall(f16, 1, step, &q[h*hd], 4*hd, base, &k.Tab[i], bb, hd, &out[h*ostride+i*k.BT], 4*ostride, scale)
		}
		i += step
	}
}

func attnQKGo(q []float32, nq, hd int, k *KVRows, nb int, scale float32, out []float32, ostride int) {
	bt := k.BT
	for i := 0; i < nb; i++ {
		base := int(k.Tab[i])*k.BlockElems + k.Off
		for h := 0; h < nq; h++ {
			qh := q[h*hd : (h+1)*hd]
			o := out[h*ostride+i*bt : h*ostride+(i+1)*bt]
			for j := range o {
				var s float32
				for d, x := range qh {
					s += x * k.val(base+d*bt+j)
				}
				o[j] = scale * s
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
	if !tileFast(bt) || hd%64 != 0 {
		attnPVGo(p, pstride, nq, hd, v, cnt, out, ostride)
		return
	}
	f16 := v.F16 != nil
	for i := 0; i < nb; i++ {
		rows := min(bt, cnt-i*bt)
		for c := 0; c < hd; c += 64 {
			vp, size := v.at(int(v.Tab[i])*v.BlockElems + v.Off + c)
			h := 0
			for ; h+4 <= nq; h += 4 {
				pvCall(f16, 4, &p[h*pstride+i*bt], 4*pstride, vp, size*v.Stride, rows, &out[h*ostride+c], 4*ostride)
			}
			for ; h < nq; h++ {
				pvCall(f16, 1, &p[h*pstride+i*bt], 4*pstride, vp, size*v.Stride, rows, &out[h*ostride+c], 4*ostride)
			}
		}
	}
}

func attnPVGo(p []float32, pstride, nq, hd int, v *KVRows, cnt int, out []float32, ostride int) {
	bt := v.BT
	for t := 0; t < cnt; t++ {
		base := int(v.Tab[t/bt])*v.BlockElems + v.Off + (t%bt)*v.Stride
		for h := 0; h < nq; h++ {
			w := p[h*pstride+t]
			o := out[h*ostride : h*ostride+hd]
			for c := range o {
				o[c] += w * v.val(base+c)
			}
		}
	}
}

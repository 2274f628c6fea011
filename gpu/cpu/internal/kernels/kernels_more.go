package kernels

import (
	"encoding/binary"

	"github.com/zerolayer/zerolayer/gpu/quant"
)

// Kernels of the further GGML types: Q4_1, Q5_0 and Q5_1 weights against
// Q8_0 activations (qs, d), and Q2_K, Q3_K and Q5_K against blockQ8K. Each
// has a Go twin (below) and an AVX2 kernel
// (quant_more_amd64.s) that computes the same integer sums and folds them
// into floats in a different order. Q5_K and Q3_K have four-row kernels;
// the x4 forms of the others run the single-row kernel for each row.

const (
	bytesQ4_1 = quant.BlockQ4_1
	bytesQ5_0 = quant.BlockQ5_0
	bytesQ5_1 = quant.BlockQ5_1
	bytesQ2_K = quant.BlockQ2_K
	bytesQ3_K = quant.BlockQ3_K
	bytesQ5_K = quant.BlockQ5_K
)

// q5High returns the fifth bit of element j of a Q5 block with bits qh.
func q5High(qh uint32, j int) uint8 { return uint8(qh>>uint(j)&1) << 4 }

// dotQ4_1Go: Σ d·dx·Σ q·xq + m·dx·Σ xq over the nb blocks.
func dotQ4_1Go(w []byte, xq []int8, xd []float32, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ4_1 : (b+1)*bytesQ4_1]
		q := xq[b*qk8 : b*qk8+qk8]
		var s, sx int32
		for j := 0; j < 16; j++ {
			s += int32(blk[4+j]&0xf)*int32(q[j]) + int32(blk[4+j]>>4)*int32(q[j+16])
			sx += int32(q[j]) + int32(q[j+16])
		}
		sum += float32(s)*(halfAt(blk)*xd[b]) + float32(sx)*(halfAt(blk[2:])*xd[b])
	}
	return sum
}

// dotQ5_0Go: the quants multiply as unsigned 0..31 and −16·Σ xq corrects.
func dotQ5_0Go(w []byte, xq []int8, xd []float32, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ5_0 : (b+1)*bytesQ5_0]
		qh := binary.LittleEndian.Uint32(blk[2:])
		q := xq[b*qk8 : b*qk8+qk8]
		var s, sx int32
		for j := 0; j < 16; j++ {
			s += int32(blk[6+j]&0xf|q5High(qh, j))*int32(q[j]) + int32(blk[6+j]>>4|q5High(qh, j+16))*int32(q[j+16])
			sx += int32(q[j]) + int32(q[j+16])
		}
		s -= 16 * sx
		sum += float32(s) * (halfAt(blk) * xd[b])
	}
	return sum
}

func dotQ5_1Go(w []byte, xq []int8, xd []float32, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ5_1 : (b+1)*bytesQ5_1]
		qh := binary.LittleEndian.Uint32(blk[4:])
		q := xq[b*qk8 : b*qk8+qk8]
		var s, sx int32
		for j := 0; j < 16; j++ {
			s += int32(blk[8+j]&0xf|q5High(qh, j))*int32(q[j]) + int32(blk[8+j]>>4|q5High(qh, j+16))*int32(q[j+16])
			sx += int32(q[j]) + int32(q[j+16])
		}
		sum += float32(s)*(halfAt(blk)*xd[b]) + float32(sx)*(halfAt(blk[2:])*xd[b])
	}
	return sum
}

// dotQ5_KGo: as dotQ4_KGo with the fifth bits from qh.
func dotQ5_KGo(w []byte, x []blockQ8K, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ5_K : (b+1)*bytesQ5_K]
		a := &x[b]
		sc, m := scalesK4(blk[4:16])
		qh := blk[16:48]
		var isum, msum int32
		for j := 0; j < 8; j++ {
			q := blk[48+32*(j/2):]
			shift := 4 * uint(j%2)
			var s int32
			for l := 0; l < 32; l++ {
				u := q[l]>>shift&0xf | (qh[l]>>uint(j)&1)<<4
				s += int32(u) * int32(a.qs[32*j+l])
			}
			isum += s * int32(sc[j])
			msum += int32(m[j]) * (int32(a.bsums[2*j]) + int32(a.bsums[2*j+1]))
		}
		d := halfAt(blk) * a.d
		dmin := halfAt(blk[2:]) * a.d
		sum += d*float32(isum) - dmin*float32(msum)
	}
	return sum
}

// dotQ3_KGo: the quants multiply as unsigned 0..7 (low bits | high bit<<2)
// and −4·Σ scale·bsum corrects, once per super-block.
func dotQ3_KGo(w []byte, x []blockQ8K, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ3_K : (b+1)*bytesQ3_K]
		a := &x[b]
		hm, qs, s := blk[0:32], blk[32:96], blk[96:108]
		var isum, corr int32
		for i := 0; i < 16; i++ {
			sc := int32(quant.ScaleK3(i, s)) - 32
			var t int32
			for e := 16 * i; e < 16*i+16; e++ {
				u := qs[32*(e/128)+e%32]>>(2*uint(e/32%4))&3 | (hm[e%32]>>uint(e/32)&1)<<2
				t += int32(u) * int32(a.qs[e])
			}
			isum += sc * t
			corr += sc * int32(a.bsums[i])
		}
		isum -= 4 * corr
		sum += halfAt(blk[108:]) * a.d * float32(isum)
	}
	return sum
}

// dotQ2_KGo: d·dx·Σ sc·Σ q·x − dmin·dx·Σ m·bsum.
func dotQ2_KGo(w []byte, x []blockQ8K, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ2_K : (b+1)*bytesQ2_K]
		a := &x[b]
		sc, qs := blk[0:16], blk[16:80]
		var isum, msum int32
		for i := 0; i < 16; i++ {
			var t int32
			for e := 16 * i; e < 16*i+16; e++ {
				u := qs[32*(e/128)+e%32] >> (2 * uint(e/32%4)) & 3
				t += int32(u) * int32(a.qs[e])
			}
			isum += int32(sc[i]&0xf) * t
			msum += int32(sc[i]>>4) * int32(a.bsums[i])
		}
		d := halfAt(blk[80:]) * a.d
		dmin := halfAt(blk[82:]) * a.d
		sum += d*float32(isum) - dmin*float32(msum)
	}
	return sum
}

// Dispatch.

// dotQ5_Kx4: four activation rows of blocks at a stride of xs blocks.
func dotQ5_Kx4(w []byte, x []blockQ8K, xs int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_, _ = w[nb*bytesQ5_K-1], x[3*xs+nb-1]
	if useAsm {
		dotQ5_Kx4AVX2(&w[0], &x[0], nb, xs*320, out)
		return
	}
	dotQ8Kx4(dotQ5_KGo, w, x, xs, nb, out)
}

func dotQ3_Kx4(w []byte, x []blockQ8K, xs int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_, _ = w[nb*bytesQ3_K-1], x[3*xs+nb-1]
	if useAsm {
		dotQ3_Kx4AVX2(&w[0], &x[0], nb, xs*320, out)
		return
	}
	dotQ8Kx4(dotQ3_KGo, w, x, xs, nb, out)
}

func dotQ4_1(w []byte, xq []int8, xd []float32, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _, _ = w[nb*bytesQ4_1-1], xq[nb*qk8-1], xd[nb-1]
	if useAsm {
		return dotQ4_1AVX2(&w[0], &xq[0], &xd[0], nb)
	}
	return dotQ4_1Go(w, xq, xd, nb)
}

func dotQ5_0(w []byte, xq []int8, xd []float32, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _, _ = w[nb*bytesQ5_0-1], xq[nb*qk8-1], xd[nb-1]
	if useAsm {
		return dotQ5_0AVX2(&w[0], &xq[0], &xd[0], nb)
	}
	return dotQ5_0Go(w, xq, xd, nb)
}

func dotQ5_1(w []byte, xq []int8, xd []float32, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _, _ = w[nb*bytesQ5_1-1], xq[nb*qk8-1], xd[nb-1]
	if useAsm {
		return dotQ5_1AVX2(&w[0], &xq[0], &xd[0], nb)
	}
	return dotQ5_1Go(w, xq, xd, nb)
}

func dotQ5_K(w []byte, x []blockQ8K, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*bytesQ5_K-1], x[nb-1]
	if useAsm {
		return dotQ5_KAVX2(&w[0], &x[0], nb)
	}
	return dotQ5_KGo(w, x, nb)
}

func dotQ3_K(w []byte, x []blockQ8K, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*bytesQ3_K-1], x[nb-1]
	if useAsm {
		return dotQ3_KAVX2(&w[0], &x[0], nb)
	}
	return dotQ3_KGo(w, x, nb)
}

func dotQ2_K(w []byte, x []blockQ8K, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*bytesQ2_K-1], x[nb-1]
	if useAsm {
		return dotQ2_KAVX2(&w[0], &x[0], nb)
	}
	return dotQ2_KGo(w, x, nb)
}

// dotQ8x4 runs a single-row Q8_0-activation kernel for four rows, qs at a
// stride of qs elements and scales at a stride of ds.
func dotQ8x4(f func([]byte, []int8, []float32, int) float32, w []byte, xq []int8, qs int, xd []float32, ds, nb int, out *[4]float32) {
	for i := range out {
		out[i] = f(w, xq[i*qs:], xd[i*ds:], nb)
	}
}

// dotQ8Kx4 runs a single-row Q8_K-activation kernel for four rows at a
// stride of xs blocks.
func dotQ8Kx4(f func([]byte, []blockQ8K, int) float32, w []byte, x []blockQ8K, xs, nb int, out *[4]float32) {
	for i := range out {
		out[i] = f(w, x[i*xs:], nb)
	}
}

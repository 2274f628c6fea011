package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu/quant"
)

// Pure Go twins of the assembly kernels. They define the results the
// assembly must reproduce: the integer parts exactly, the float sums up to
// rounding (the assembly sums in a different order).

// Block sizes in bytes of the weight formats.
const (
	bytesQ8_0 = 34
	bytesQ4_0 = 18
	bytesQ4_K = 144
	bytesQ6_K = 210
)

func sumF32Go(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return s0 + s1 + s2 + s3
}

func dotF32Go(x, w []float32) float32 {
	w = w[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * w[i]
		s1 += x[i+1] * w[i+1]
		s2 += x[i+2] * w[i+2]
		s3 += x[i+3] * w[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * w[i]
	}
	return s0 + s1 + s2 + s3
}

// f16Table maps every half value to float32 for the generic F16 kernel.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = quant.FP16ToFloat32(uint16(i))
	}
	return &t
}()

func dotF16Go(x []float32, w []uint16) float32 {
	w = w[:len(x)]
	t := f16Table
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		s0 += x[i] * t[w[i]]
		s1 += x[i+1] * t[w[i+1]]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * t[w[i]]
	}
	return s0 + s1
}

func dotBF16Go(x []float32, w []uint16) float32 {
	w = w[:len(x)]
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		s0 += x[i] * quant.BF16ToFloat32(w[i])
		s1 += x[i+1] * quant.BF16ToFloat32(w[i+1])
	}
	for ; i < len(x); i++ {
		s0 += x[i] * quant.BF16ToFloat32(w[i])
	}
	return s0 + s1
}

func halfAt(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// dotQ8_0Go: nb Q8_0 weight blocks against Q8_0 activations.
func dotQ8_0Go(w []byte, xq []int8, xd []float32, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ8_0 : (b+1)*bytesQ8_0]
		q := xq[b*qk8 : b*qk8+qk8]
		var s int32
		for j := range q {
			s += int32(int8(blk[2+j])) * int32(q[j])
		}
		sum += float32(s) * (halfAt(blk) * xd[b])
	}
	return sum
}

// dotQ4_0Go: nb Q4_0 weight blocks against pairQ4 activations. The
// nibbles multiply as unsigned 0..15; the correction adds the −8 offset.
func dotQ4_0Go(w []byte, x []pairQ4, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ4_0 : (b+1)*bytesQ4_0]
		p, h := &x[b/2], b%2
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(blk[2+j]&0xf) * int32(p.lo[16*h+j])
			s += int32(blk[2+j]>>4) * int32(p.hi[16*h+j])
		}
		s += p.corr[4*h]
		sum += float32(s) * (halfAt(blk) * p.d[4*h])
	}
	return sum
}

// scalesK4 unpacks the eight 6-bit scales and mins of a Q4_K super-block.
func scalesK4(s []byte) (sc, m [8]uint8) {
	for j := range 8 {
		sc[j], m[j] = quant.ScaleMinK4(j, s)
	}
	return
}

// dotQ4_KGo: nb Q4_K weight super-blocks against Q8_K activations.
func dotQ4_KGo(w []byte, x []blockQ8K, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ4_K : (b+1)*bytesQ4_K]
		a := &x[b]
		sc, m := scalesK4(blk[4:16])
		var isum, msum int32
		for j := 0; j < 8; j++ {
			q := blk[16+32*(j/2):]
			shift := 4 * uint(j%2)
			var s int32
			for l := 0; l < 32; l++ {
				s += int32(q[l]>>shift&0xf) * int32(a.qs[32*j+l])
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

// dotQ6_KGo: nb Q6_K weight super-blocks against Q8_K activations.
func dotQ6_KGo(w []byte, x []blockQ8K, nb int) float32 {
	var sum float32
	for b := 0; b < nb; b++ {
		blk := w[b*bytesQ6_K : (b+1)*bytesQ6_K]
		a := &x[b]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		var isum, corr int32
		for n := 0; n < 2; n++ {
			for k := 0; k < 4; k++ {
				// Quarter k of half n: 32 elements with scales g·2, g·2+1.
				g := 4*n + k
				lo := ql[64*n+32*(k%2):]
				loShift := 4 * uint(k/2)
				hi := qh[32*n:]
				hiShift := 2 * uint(k)
				for h := 0; h < 2; h++ {
					var s int32
					for l := 16 * h; l < 16*h+16; l++ {
						q := int32(lo[l]>>loShift&0xf | (hi[l]>>hiShift&3)<<4)
						s += q * int32(a.qs[128*n+32*k+l])
					}
					isum += s * int32(int8(sc[2*g+h]))
				}
			}
		}
		for i := 0; i < 16; i++ {
			corr += int32(int8(sc[i])) * int32(a.bsums[i])
		}
		isum -= 32 * corr
		sum += halfAt(blk[208:]) * a.d * float32(isum)
	}
	return sum
}

func u16s(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func dotRowsGo(x, w []float32, stride int, scale float32, out []float32) {
	for r := range out {
		out[r] = scale * dotF32Go(x, w[r*stride:])
	}
}

func axpyRowsGo(p, v []float32, stride int, out []float32) {
	for r, a := range p {
		row := v[r*stride : r*stride+len(out)]
		for i, x := range row {
			out[i] += a * x
		}
	}
}

func maxF32Go(x []float32, m float32) float32 {
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

func sumExpGo(dst, x []float32, m, scale float32) float64 {
	var s float64
	for i, v := range x {
		e := expNeg((v - m) * scale)
		if dst != nil {
			dst[i] = e
		}
		s += float64(e)
	}
	return s
}

// expNeg returns e**x for x ≤ 0 in float32 with a relative error of about
// 2e-7 (0 below −87): x = k·ln2 + r with k = round(x·log2e) and
// |r| ≤ ln2/2, e**r by a degree-6 polynomial, and k added to the exponent
// bits. The assembly computes the same steps with fused multiply-adds.
func expNeg(x float32) float32 {
	if !(x >= -87) {
		return 0
	}
	const log2e, ln2hi, ln2lo = 1.442695040888963, 0.693145751953125, 1.428606765330187e-06
	k := float32(math.RoundToEven(float64(x * log2e)))
	r := x - k*ln2hi
	r -= k * ln2lo
	p := float32(1.0 / 720)
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return math.Float32frombits(math.Float32bits(p) + uint32(int32(k))<<23)
}

// siluMulGo computes silu(g)·u from e = e**−|g|: silu(x) is x/(1+e) for
// x ≥ 0 and x·e/(1+e) for x < 0.
func siluMulGo(dst, g, u []float32) {
	u = u[:len(dst)]
	g = g[:len(dst)]
	for i, x := range g {
		e := expNeg(-abs32(x))
		num := x
		if math.Signbit(float64(x)) {
			num = x * e
		}
		dst[i] = num / (1 + e) * u[i]
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

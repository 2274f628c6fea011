package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
)

// Quantize encodes src as blocks of type t. len(src) must be a multiple of
// the block size. Q8_0 and Q4_0 follow ggml's reference rounding; Q4_K and
// Q6_K use a small search for each sub-block's scale (and min) that keeps
// the error low but need not match ggml byte for byte. Every result decodes
// with Dequantize.
func Quantize(t gpu.DType, src []float32) ([]byte, error) {
	n, err := t.RowBytes(len(src))
	if err != nil {
		return nil, err
	}
	dst := make([]byte, n)
	switch t {
	case gpu.F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case gpu.F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToFP16(v))
		}
	case gpu.BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(v))
		}
	case gpu.Q8_0:
		for b := 0; b < len(src)/QK8_0; b++ {
			QuantizeQ8_0Block(src[b*QK8_0:(b+1)*QK8_0], dst[b*BlockQ8_0:(b+1)*BlockQ8_0])
		}
	case gpu.Q4_0:
		for b := 0; b < len(src)/QK4_0; b++ {
			QuantizeQ4_0Block(src[b*QK4_0:(b+1)*QK4_0], dst[b*BlockQ4_0:(b+1)*BlockQ4_0])
		}
	case gpu.Q4_K:
		for b := 0; b < len(src)/QK_K; b++ {
			QuantizeQ4_KBlock(src[b*QK_K:(b+1)*QK_K], dst[b*BlockQ4_K:(b+1)*BlockQ4_K])
		}
	case gpu.Q6_K:
		for b := 0; b < len(src)/QK_K; b++ {
			QuantizeQ6_KBlock(src[b*QK_K:(b+1)*QK_K], dst[b*BlockQ6_K:(b+1)*BlockQ6_K])
		}
	case gpu.Q4_1:
		for b := 0; b < len(src)/QK4_0; b++ {
			QuantizeQ4_1Block(src[b*QK4_0:(b+1)*QK4_0], dst[b*BlockQ4_1:(b+1)*BlockQ4_1])
		}
	case gpu.Q5_0:
		for b := 0; b < len(src)/QK4_0; b++ {
			QuantizeQ5_0Block(src[b*QK4_0:(b+1)*QK4_0], dst[b*BlockQ5_0:(b+1)*BlockQ5_0])
		}
	case gpu.Q5_1:
		for b := 0; b < len(src)/QK4_0; b++ {
			QuantizeQ5_1Block(src[b*QK4_0:(b+1)*QK4_0], dst[b*BlockQ5_1:(b+1)*BlockQ5_1])
		}
	case gpu.Q2_K:
		for b := 0; b < len(src)/QK_K; b++ {
			QuantizeQ2_KBlock(src[b*QK_K:(b+1)*QK_K], dst[b*BlockQ2_K:(b+1)*BlockQ2_K])
		}
	case gpu.Q3_K:
		for b := 0; b < len(src)/QK_K; b++ {
			QuantizeQ3_KBlock(src[b*QK_K:(b+1)*QK_K], dst[b*BlockQ3_K:(b+1)*BlockQ3_K])
		}
	case gpu.Q5_K:
		for b := 0; b < len(src)/QK_K; b++ {
			QuantizeQ5_KBlock(src[b*QK_K:(b+1)*QK_K], dst[b*BlockQ5_K:(b+1)*BlockQ5_K])
		}
	default:
		return nil, fmt.Errorf("%w: %v", gpu.ErrUnsupportedType, t)
	}
	return dst, nil
}

func putHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, Float32ToFP16(f)) }

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func round32(f float32) int { return int(math.Round(float64(f))) }

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// QuantizeQ8_0Block encodes 32 values as one Q8_0 block: d = amax/127 and
// each quant is round(x/d).
func QuantizeQ8_0Block(x []float32, blk []byte) {
	x = x[:QK8_0]
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(blk, d)
	q := blk[2:BlockQ8_0]
	for j, v := range x {
		q[j] = byte(int8(round32(v * id)))
	}
}

// QuantizeQ4_0Block encodes 32 values as one Q4_0 block with ggml's rule:
// d = m / -8 where m is the value of largest magnitude.
func QuantizeQ4_0Block(x []float32, blk []byte) {
	x = x[:QK4_0]
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	d := mx / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(blk, d)
	q := blk[2:BlockQ4_0]
	for j := 0; j < QK4_0/2; j++ {
		q0 := min(15, int(int8(x[j]*id+8.5)))
		q1 := min(15, int(int8(x[j+QK4_0/2]*id+8.5)))
		q[j] = byte(q0) | byte(q1)<<4
	}
}

// fitScaleMin finds a ≥ 0 and m ≥ 0 so that x ≈ a·q − m with integer q in
// [0, nmax], trying a few grid scalings and refining each by least squares.
func fitScaleMin(x []float32, nmax int) (a, m float32) {
	lo, hi := float32(0), x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		return 0, -lo
	}
	bestA, bestB := (hi-lo)/float32(nmax), lo
	bestErr := float32(math.Inf(1))
	n := float32(len(x))
	for step := -6; step <= 6; step++ {
		iscale := (float32(nmax) + 0.15*float32(step)) / (hi - lo)
		var sq, sqq, sx, sqx float32
		for _, v := range x {
			q := float32(clamp(round32(iscale*(v-lo)), 0, nmax))
			sq += q
			sqq += q * q
			sx += v
			sqx += q * v
		}
		det := n*sqq - sq*sq
		if det <= 0 {
			continue
		}
		ca := (n*sqx - sq*sx) / det
		cb := (sqq*sx - sq*sqx) / det
		if cb > 0 {
			cb, ca = 0, sqx/sqq
		}
		if ca <= 0 {
			continue
		}
		var e float32
		for _, v := range x {
			q := float32(clamp(round32((v-cb)/ca), 0, nmax))
			r := ca*q + cb - v
			e += r * r
		}
		if e < bestErr {
			bestErr, bestA, bestB = e, ca, cb
		}
	}
	return bestA, -bestB
}

// QuantizeQ4_KBlock encodes 256 values as one Q4_K super-block.
func QuantizeQ4_KBlock(x []float32, blk []byte) {
	x = x[:QK_K]
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		scales[j], mins[j] = fitScaleMin(x[32*j:32*j+32], 15)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	putHalf(blk, maxScale/63)
	putHalf(blk[2:], maxMin/63)
	d, dmin := half(blk), half(blk[2:])
	var ls, lm [8]int
	for j := range 8 {
		if d > 0 {
			ls[j] = clamp(round32(scales[j]/d), 0, 63)
		}
		if dmin > 0 {
			lm[j] = clamp(round32(mins[j]/dmin), 0, 63)
		}
	}
	s := blk[4:16]
	clear(s)
	for j := range 8 {
		if j < 4 {
			s[j] = byte(ls[j])
			s[j+4] = byte(lm[j])
		} else {
			s[j+4] = byte(ls[j]&0xf | (lm[j]&0xf)<<4)
			s[j-4] |= byte(ls[j]>>4) << 6
			s[j] |= byte(lm[j]>>4) << 6
		}
	}
	var q [QK_K]uint8
	for j := range 8 {
		sc, m := ScaleMinK4(j, s)
		dj, mj := d*float32(sc), dmin*float32(m)
		for l := 32 * j; l < 32*j+32; l++ {
			if dj > 0 {
				q[l] = uint8(clamp(round32((x[l]+mj)/dj), 0, 15))
			}
		}
	}
	qs := blk[16:BlockQ4_K]
	for c := range 4 {
		for l := range 32 {
			qs[32*c+l] = q[64*c+l] | q[64*c+32+l]<<4
		}
	}
}

// fitScale finds s so that x ≈ s·q with integer q in [-nmax, nmax-1].
func fitScale(x []float32, nmax int) float32 {
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax == 0 {
		return 0
	}
	best, bestErr := mx/-float32(nmax), float32(math.Inf(1))
	for step := -6; step <= 6; step++ {
		iscale := -(float32(nmax) + 0.15*float32(step)) / mx
		var sqq, sqx float32
		for _, v := range x {
			q := float32(clamp(round32(iscale*v), -nmax, nmax-1))
			sqq += q * q
			sqx += q * v
		}
		if sqq == 0 {
			continue
		}
		s := sqx / sqq
		var e float32
		for _, v := range x {
			q := float32(clamp(round32(v/s), -nmax, nmax-1))
			r := s*q - v
			e += r * r
		}
		if e < bestErr {
			best, bestErr = s, e
		}
	}
	return best
}

// QuantizeQ6_KBlock encodes 256 values as one Q6_K super-block.
func QuantizeQ6_KBlock(x []float32, blk []byte) {
	x = x[:QK_K]
	var scales [16]float32
	var amax float32
	for i := range 16 {
		scales[i] = fitScale(x[16*i:16*i+16], 32)
		amax = max(amax, abs32(scales[i]))
	}
	putHalf(blk[208:], amax/127)
	d := half(blk[208:])
	sc := blk[192:208]
	var q [QK_K]uint8
	for i := range 16 {
		var ls int
		if d > 0 {
			ls = clamp(round32(scales[i]/d), -128, 127)
		}
		sc[i] = byte(int8(ls))
		ds := d * float32(ls)
		for l := 16 * i; l < 16*i+16; l++ {
			v := 0
			if ds != 0 {
				v = clamp(round32(x[l]/ds), -32, 31)
			}
			q[l] = uint8(v + 32)
		}
	}
	ql, qh := blk[0:128], blk[128:192]
	for n := range 2 {
		qn := q[128*n:]
		for l := range 32 {
			ql[64*n+l] = qn[l]&0xf | (qn[l+64]&0xf)<<4
			ql[64*n+32+l] = qn[l+32]&0xf | (qn[l+96]&0xf)<<4
			qh[32*n+l] = qn[l]>>4 | (qn[l+32]>>4)<<2 | (qn[l+64]>>4)<<4 | (qn[l+96]>>4)<<6
		}
	}
}

package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Pure Go twins of the packed kernels (q8gen's VNNI and AVX2 families).
// They take the kernels' arguments (strides in bytes) and define their
// bits: each lane's integer sum of a block or super-block is exact, and its
// float operations are the kernels', in their order (the conversion, the
// weight scale times the activation scale, one fused multiply-add).

// packKernel types: the Q8_0 and Q4_0 kernels take Q8_0 activation blocks
// and their q8Meta, the K-quant ones Q8_K super-blocks. out[16·i + j] is
// activation row i times weight row j of the group.
type (
	packQ8Kernel func(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)
	packKKernel  func(w *byte, nb int, x *blockQ8K, xstride int, out *float32)
	// packQ8PairKernel is the q8MaxRows-row kernel of two groups, at w
	// and w + wstride: out[q8MaxRows·16·p + 16·i + j] is group p's.
	packQ8PairKernel func(w *byte, wstride int, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)
)

// packKernels is one family of packed kernels, by activation rows (index
// rows − 1), and where the family has them, kernels of q8MaxRows rows by
// two groups (nil: tilePacked runs the one-group kernel twice, which gives
// the same bits).
type packKernels struct {
	q8, q4     [q8MaxRows]packQ8Kernel
	q4k, q6k   [q8MaxRows]packKKernel
	q8x2, q4x2 packQ8PairKernel
}

// packGo are the Go twins, by activation rows.
var packGo = func() packKernels {
	var k packKernels
	k.q8x2 = func(w *byte, wstride int, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
		dotQ8PGo(false, q8MaxRows, w, nb, x, xstride, meta, mstride, out)
		dotQ8PGo(false, q8MaxRows, (*byte)(unsafe.Add(unsafe.Pointer(w), wstride)), nb, x, xstride, meta, mstride, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*q8MaxRows*q8Group)))
	}
	k.q4x2 = func(w *byte, wstride int, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
		dotQ8PGo(true, q8MaxRows, w, nb, x, xstride, meta, mstride, out)
		dotQ8PGo(true, q8MaxRows, (*byte)(unsafe.Add(unsafe.Pointer(w), wstride)), nb, x, xstride, meta, mstride, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*q8MaxRows*q8Group)))
	}
	for r := 1; r <= q8MaxRows; r++ {
		k.q8[r-1] = func(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
			dotQ8PGo(false, r, w, nb, x, xstride, meta, mstride, out)
		}
		k.q4[r-1] = func(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
			dotQ8PGo(true, r, w, nb, x, xstride, meta, mstride, out)
		}
		k.q4k[r-1] = func(w *byte, nb int, x *blockQ8K, xstride int, out *float32) {
			dotQKPGo(false, r, w, nb, x, xstride, out)
		}
		k.q6k[r-1] = func(w *byte, nb int, x *blockQ8K, xstride int, out *float32) {
			dotQKPGo(true, r, w, nb, x, xstride, out)
		}
	}
	return k
}()

// fma32 is x·y + z rounded once to float32, as VFMADD231PS computes it:
// the product is exact in float64, the sum is rounded to odd in float64
// (its error, exact by TwoSum, decides), and rounding to odd at 53 bits
// then to nearest at 24 rounds as once.
func fma32(x, y, z float32) float32 {
	p, c := float64(x)*float64(y), float64(z)
	s := p + c
	bp := s - c
	e := (p - bp) + (c - (s - bp))
	if e != 0 && math.Float64bits(s)&1 == 0 {
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

// f32At reads the float32 at b[i:]. (The twins convert each scale product
// to float32 explicitly, so that no compiler fuses it into the add.)
func f32At(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[i:])) }

// dotQ8PGo is the twin of dotQ8P<rows> (q4: dotQ4P<rows>).
func dotQ8PGo(q4 bool, rows int, w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
	block, scales := q8PackBlock, 512
	if q4 {
		block, scales = q4PackBlock, 256
	}
	ws := unsafe.Slice(w, nb*block)
	xs := unsafe.Slice(x, (rows-1)*xstride+nb*qk8)
	ms := unsafe.Slice(meta, (rows-1)*mstride/8+nb)
	o := unsafe.Slice(out, rows*q8Group)
	for i := 0; i < rows; i++ {
		xi, mi := xs[i*xstride:], ms[i*mstride/8:]
		for j := 0; j < q8Group; j++ {
			var acc float32
			for b := 0; b < nb; b++ {
				blk, xb := ws[b*block:], xi[b*qk8:]
				var s int32
				for c := 0; c < qk8; c++ {
					var v byte
					if q4 {
						v = blk[64*(c/8)+4*j+c%4] >> (c % 8 / 4 * 4) & 15 // w + 8
					} else {
						v = blk[64*(c/4)+4*j+c%4] // w + 128
					}
					s += int32(v) * int32(xb[c])
				}
				s += mi[b].c // −bias × the activations' sum
				acc = fma32(float32(s), float32(f32At(blk, scales+4*j)*mi[b].d), acc)
			}
			o[q8Group*i+j] = acc
		}
	}
}

// dotQKPGo is the twin of dotQ4KP<rows> (q6: dotQ6KP<rows>).
func dotQKPGo(q6 bool, rows int, w *byte, nb int, x *blockQ8K, xstride int, out *float32) {
	block := q4kPackBlock
	if q6 {
		block = q6kPackBlock
	}
	ws := unsafe.Slice(w, nb*block)
	o := unsafe.Slice(out, rows*q8Group)
	for i := 0; i < rows; i++ {
		xi := unsafe.Slice((*blockQ8K)(unsafe.Add(unsafe.Pointer(x), i*xstride)), nb)
		for j := 0; j < q8Group; j++ {
			var acc float32
			for b := 0; b < nb; b++ {
				blk, xb := ws[b*block:], &xi[b]
				if q6 {
					acc = q6kPackedStep(blk, xb, j, acc)
				} else {
					acc = q4kPackedStep(blk, xb, j, acc)
				}
			}
			o[q8Group*i+j] = acc
		}
	}
}

// q4kPackedStep adds row j's super-block blk times xb to acc.
func q4kPackedStep(blk []byte, xb *blockQ8K, j int, acc float32) float32 {
	var s, m int32
	for sb := 0; sb < 8; sb++ {
		var d int32
		for c := 0; c < 32; c++ {
			v := blk[256*sb+64*(c/8)+4*j+c%4] >> (c % 8 / 4 * 4) & 15
			d += int32(v) * int32(xb.qs[32*sb+c])
		}
		s += int32(blk[2048+16*sb+j]) * d
		mins := blk[2176+32*sb+2*j:]
		m += int32(mins[0])*int32(xb.bsums[2*sb]) + int32(mins[1])*int32(xb.bsums[2*sb+1])
	}
	acc = fma32(float32(s), float32(f32At(blk, 2432+4*j)*xb.d), acc)
	return fma32(-float32(m), float32(f32At(blk, 2496+4*j)*xb.d), acc)
}

// q6kPackedStep is q4kPackedStep for Q6_K.
func q6kPackedStep(blk []byte, xb *blockQ8K, j int, acc float32) float32 {
	var s, off int32
	for sb := 0; sb < 16; sb++ {
		var d int32
		for c := 0; c < 16; c++ {
			q := c / 4
			lo := blk[192*sb+64*(q/2)+4*j+c%4] >> (q % 2 * 4) & 15
			hi := blk[192*sb+128+4*j+c%4] >> (2 * q) & 3
			d += int32(lo|hi<<4) * int32(xb.qs[16*sb+c])
		}
		sc := blk[3072+32*(sb/2)+2*j:]
		s += int32(int8(sc[sb%2])) * d
		if sb%2 == 1 {
			off += int32(int8(sc[0]))*int32(xb.bsums[sb-1]) + int32(int8(sc[1]))*int32(xb.bsums[sb])
		}
	}
	s -= off << 5
	return fma32(float32(s), float32(f32At(blk, 3328+4*j)*xb.d), acc)
}

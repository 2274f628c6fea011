package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// packed is a weight matrix in the device layout of the kernels (struct Mat
// in kernels/common.cuh): rows padded for vector loads, quantized values in
// natural element order, scales in arrays of their own. It is built on the
// host when a matrix is uploaded; pack is pure Go so that it is tested
// without a device.
type packed struct {
	t          gpu.DType
	rows, cols int
	kp         int    // row length in elements after padding
	data       []byte // every section, each starting at a multiple of packAlign
	off        [4]int // byte offset of sections a0..a3 in data
}

// packAlign aligns each section for 16-byte vector loads (and more).
const packAlign = 256

// padCols returns the padded row length of a matrix of type t: rows of
// F32, F16 and BF16 are padded with zeros to a multiple of 8 elements, so
// that the kernels load them 16 or 32 bytes at a time.
func padCols(t gpu.DType, cols int) int {
	switch t {
	case gpu.F32, gpu.F16, gpu.BF16:
		return (cols + 7) &^ 7
	}
	return cols
}

// sectionSizes returns the byte sizes of sections a0..a3.
func sectionSizes(t gpu.DType, rows, cols int) [4]int {
	kp := padCols(t, cols)
	switch t {
	case gpu.F32:
		return [4]int{rows * kp * 4}
	case gpu.F16, gpu.BF16:
		return [4]int{rows * kp * 2}
	case gpu.Q8_0:
		return [4]int{rows * cols, rows * cols / 32 * 2}
	case gpu.Q4_0:
		return [4]int{rows * cols / 2, rows * cols / 32 * 2}
	case gpu.Q4_K:
		return [4]int{rows * cols / 2, rows * cols / 32 * 2, rows * cols / 256 * 4}
	case gpu.Q6_K:
		return [4]int{rows * cols / 2, rows * cols / 4, rows * cols / 16, rows * cols / 256 * 2}
	}
	return [4]int{}
}

// packedLayout returns the offsets of the sections and the total size.
func packedLayout(t gpu.DType, rows, cols int) (off [4]int, total int) {
	for i, n := range sectionSizes(t, rows, cols) {
		if n == 0 {
			off[i] = total
			continue
		}
		off[i] = total
		total += (n + packAlign - 1) &^ (packAlign - 1)
	}
	return off, total
}

// pack converts rows×cols GGML-layout data of type t (rows×RowBytes(cols)
// bytes) to the device layout. When the layouts coincide (F32, F16, BF16
// with cols a multiple of 8) data is used as is, without a copy.
func pack(t gpu.DType, rows, cols int, data []byte) (*packed, error) {
	if !hasMMKernel(t) {
		// Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and Q5_K load on the CPU backend only.
		return nil, fmt.Errorf("%w: %v on cuda (no matmul kernel for it)", gpu.ErrUnsupportedType, t)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if len(data) != rows*rb {
		return nil, fmt.Errorf("%w: %v matrix %d×%d needs %d bytes, got %d", gpu.ErrShape, t, rows, cols, rows*rb, len(data))
	}
	p := &packed{t: t, rows: rows, cols: cols, kp: padCols(t, cols)}
	if p.kp == cols && (t == gpu.F32 || t == gpu.F16 || t == gpu.BF16) {
		p.data = data
		return p, nil
	}
	var total int
	p.off, total = packedLayout(t, rows, cols)
	p.data = make([]byte, total)
	out := p.data
	switch t {
	case gpu.F32, gpu.F16, gpu.BF16:
		es := 4
		if t != gpu.F32 {
			es = 2
		}
		for r := 0; r < rows; r++ {
			copy(out[r*p.kp*es:], data[r*rb:(r+1)*rb])
		}
	case gpu.Q8_0:
		qs, ds := out[p.off[0]:], out[p.off[1]:]
		nb := rows * cols / 32
		for b := 0; b < nb; b++ {
			blk := data[b*quant.BlockQ8_0:]
			copy(ds[2*b:2*b+2], blk[:2])
			copy(qs[32*b:32*b+32], blk[2:34])
		}
	case gpu.Q4_0:
		qs, ds := out[p.off[0]:], out[p.off[1]:]
		nb := rows * cols / 32
		for b := 0; b < nb; b++ {
			blk := data[b*quant.BlockQ4_0:]
			copy(ds[2*b:2*b+2], blk[:2])
			var v [32]uint8
			for j := 0; j < 16; j++ {
				v[j], v[j+16] = blk[2+j]&15, blk[2+j]>>4
			}
			putNibbles(qs[16*b:16*b+16], v[:])
		}
	case gpu.Q4_K:
		qs, sm, dd := out[p.off[0]:], out[p.off[1]:], out[p.off[2]:]
		nb := rows * cols / 256
		for b := 0; b < nb; b++ {
			blk := data[b*quant.BlockQ4_K:]
			copy(dd[4*b:4*b+4], blk[:4]) // d, then dmin: d | dmin<<16 little-endian
			scales, q := blk[4:16], blk[16:144]
			for j := 0; j < 8; j++ {
				sc, m := quant.ScaleMinK4(j, scales)
				sm[16*b+2*j], sm[16*b+2*j+1] = sc, m
			}
			var v [256]uint8
			for c := 0; c < 4; c++ {
				for l := 0; l < 32; l++ {
					v[64*c+l], v[64*c+32+l] = q[32*c+l]&15, q[32*c+l]>>4
				}
			}
			putNibbles(qs[128*b:128*b+128], v[:])
		}
	case gpu.Q6_K:
		lo, hi, sc, ds := out[p.off[0]:], out[p.off[1]:], out[p.off[2]:], out[p.off[3]:]
		nb := rows * cols / 256
		for b := 0; b < nb; b++ {
			blk := data[b*quant.BlockQ6_K:]
			ql, qh := blk[0:128], blk[128:192]
			copy(sc[16*b:16*b+16], blk[192:208]) // scale of elements 16i..16i+15 is byte i
			copy(ds[2*b:2*b+2], blk[208:210])
			var v [256]uint8
			for n := 0; n < 2; n++ {
				l0, h0 := ql[64*n:], qh[32*n:]
				for l := 0; l < 32; l++ {
					v[128*n+l] = l0[l]&15 | (h0[l]>>0&3)<<4
					v[128*n+l+32] = l0[l+32]&15 | (h0[l]>>2&3)<<4
					v[128*n+l+64] = l0[l]>>4 | (h0[l]>>4&3)<<4
					v[128*n+l+96] = l0[l+32]>>4 | (h0[l]>>6&3)<<4
				}
			}
			var low [256]uint8
			for i, q := range v {
				low[i] = q & 15
				hi[64*b+i/4] |= (q >> 4) << (2 * (i % 4))
			}
			putNibbles(lo[128*b:128*b+128], low[:])
		}
	default:
		return nil, fmt.Errorf("%w: %v", gpu.ErrUnsupportedType, t)
	}
	return p, nil
}

// putNibbles packs 4-bit values two to a byte, the first in the low nibble.
func putNibbles(dst []byte, v []uint8) {
	for i := range dst {
		dst[i] = v[2*i]&15 | v[2*i+1]<<4
	}
}

// section returns section i of the packed data.
func (p *packed) section(i int) []byte { return p.data[p.off[i]:] }

// dequantRow decodes row r of the packed matrix the way the kernels' deq
// does (kernels/common.cuh); tests compare it with quant.Dequantize.
func (p *packed) dequantRow(r int, dst []float32) {
	K, kp := p.cols, p.kp
	h := func(b []byte, i int) float32 { return quant.FP16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])) }
	nib := func(b []byte, i int) int { return int(b[i/2]>>(4*(i&1))) & 15 }
	for e := 0; e < K; e++ {
		var y float32
		switch p.t {
		case gpu.F32:
			y = math.Float32frombits(binary.LittleEndian.Uint32(p.section(0)[4*(r*kp+e):]))
		case gpu.F16:
			y = h(p.section(0), r*kp+e)
		case gpu.BF16:
			y = quant.BF16ToFloat32(binary.LittleEndian.Uint16(p.section(0)[2*(r*kp+e):]))
		case gpu.Q8_0:
			y = float32(int8(p.section(0)[r*K+e])) * h(p.section(1), (r*K+e)/32)
		case gpu.Q4_0:
			y = float32(nib(p.section(0), r*K+e)-8) * h(p.section(1), (r*K+e)/32)
		case gpu.Q4_K:
			i := r*K + e
			dd := p.section(2)[4*(i/256):]
			sm := p.section(1)[2*(i/32):]
			d1 := quant.FP16ToFloat32(binary.LittleEndian.Uint16(dd)) * float32(sm[0])
			m1 := quant.FP16ToFloat32(binary.LittleEndian.Uint16(dd[2:])) * float32(sm[1])
			y = float32(d1*float32(nib(p.section(0), i))) - m1
		case gpu.Q6_K:
			i := r*K + e
			q := nib(p.section(0), i) | int(p.section(1)[i/4]>>(2*(i%4))&3)<<4
			ds := float32(h(p.section(3), i/256) * float32(int8(p.section(2)[i/16])))
			y = ds * float32(q-32)
		}
		dst[e] = y
	}
}

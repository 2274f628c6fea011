package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
)

// Block geometry of the quantized types (see doc.go).
const (
	QK8_0 = 32  // elements per Q8_0 block
	QK4_0 = 32  // elements per Q4_0 block
	QK_K  = 256 // elements per K-quant super-block

	BlockQ8_0 = 2 + QK8_0           // 34 bytes
	BlockQ4_0 = 2 + QK4_0/2         // 18 bytes
	BlockQ4_K = 2 + 2 + 12 + QK_K/2 // 144 bytes
	BlockQ6_K = QK_K/2 + QK_K/4 + QK_K/16 + 2
)

func checkSizes(t gpu.DType, nbytes, n int) error {
	want, err := t.RowBytes(n)
	if err != nil {
		return err
	}
	if nbytes != want {
		return fmt.Errorf("quant: %v data for %d elements is %d bytes, want %d", t, n, nbytes, want)
	}
	return nil
}

// Dequantize decodes src, a sequence of blocks of type t, into dst. len(dst)
// is the element count and must be a multiple of the block size; src must
// hold exactly t.RowBytes(len(dst)) bytes. The arithmetic is GGML's, so
// results are bit-identical to ggml's dequantize_row_* functions.
func Dequantize(t gpu.DType, src []byte, dst []float32) error {
	if err := checkSizes(t, len(src), len(dst)); err != nil {
		return err
	}
	switch t {
	case gpu.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case gpu.F16:
		for i := range dst {
			dst[i] = FP16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case gpu.BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case gpu.Q8_0:
		for b := 0; b < len(dst)/QK8_0; b++ {
			DequantizeQ8_0Block(src[b*BlockQ8_0:(b+1)*BlockQ8_0], dst[b*QK8_0:(b+1)*QK8_0])
		}
	case gpu.Q4_0:
		for b := 0; b < len(dst)/QK4_0; b++ {
			DequantizeQ4_0Block(src[b*BlockQ4_0:(b+1)*BlockQ4_0], dst[b*QK4_0:(b+1)*QK4_0])
		}
	case gpu.Q4_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			DequantizeQ4_KBlock(src[b*BlockQ4_K:(b+1)*BlockQ4_K], dst[b*QK_K:(b+1)*QK_K])
		}
	case gpu.Q6_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			DequantizeQ6_KBlock(src[b*BlockQ6_K:(b+1)*BlockQ6_K], dst[b*QK_K:(b+1)*QK_K])
		}
	case gpu.Q4_1:
		for b := 0; b < len(dst)/QK4_0; b++ {
			DequantizeQ4_1Block(src[b*BlockQ4_1:(b+1)*BlockQ4_1], dst[b*QK4_0:(b+1)*QK4_0])
		}
	case gpu.Q5_0:
		for b := 0; b < len(dst)/QK4_0; b++ {
			DequantizeQ5_0Block(src[b*BlockQ5_0:(b+1)*BlockQ5_0], dst[b*QK4_0:(b+1)*QK4_0])
		}
	case gpu.Q5_1:
		for b := 0; b < len(dst)/QK4_0; b++ {
			DequantizeQ5_1Block(src[b*BlockQ5_1:(b+1)*BlockQ5_1], dst[b*QK4_0:(b+1)*QK4_0])
		}
	case gpu.Q2_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			DequantizeQ2_KBlock(src[b*BlockQ2_K:(b+1)*BlockQ2_K], dst[b*QK_K:(b+1)*QK_K])
		}
	case gpu.Q3_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			DequantizeQ3_KBlock(src[b*BlockQ3_K:(b+1)*BlockQ3_K], dst[b*QK_K:(b+1)*QK_K])
		}
	case gpu.Q5_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			DequantizeQ5_KBlock(src[b*BlockQ5_K:(b+1)*BlockQ5_K], dst[b*QK_K:(b+1)*QK_K])
		}
	default:
		return fmt.Errorf("%w: %v", gpu.ErrUnsupportedType, t)
	}
	return nil
}

func half(b []byte) float32 { return FP16ToFloat32(binary.LittleEndian.Uint16(b)) }

// DequantizeQ8_0Block decodes one 34-byte Q8_0 block into 32 values.
func DequantizeQ8_0Block(blk []byte, y []float32) {
	d := half(blk)
	q := blk[2:BlockQ8_0]
	y = y[:QK8_0]
	for j := range y {
		y[j] = float32(int8(q[j])) * d
	}
}

// DequantizeQ4_0Block decodes one 18-byte Q4_0 block into 32 values.
func DequantizeQ4_0Block(blk []byte, y []float32) {
	d := half(blk)
	q := blk[2:BlockQ4_0]
	y = y[:QK4_0]
	for j := 0; j < QK4_0/2; j++ {
		y[j] = float32(int(q[j]&0xf)-8) * d
		y[j+QK4_0/2] = float32(int(q[j]>>4)-8) * d
	}
}

// ScaleMinK4 returns the 6-bit scale and min of sub-block j (0..7) from the
// 12 packed bytes of a Q4_K super-block.
func ScaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// DequantizeQ4_KBlock decodes one 144-byte Q4_K super-block into 256 values.
func DequantizeQ4_KBlock(blk []byte, y []float32) {
	d := half(blk)
	dmin := half(blk[2:])
	scales := blk[4:16]
	q := blk[16:BlockQ4_K]
	y = y[:QK_K]
	for c := 0; c < 4; c++ {
		sc, m := ScaleMinK4(2*c, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = ScaleMinK4(2*c+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		qc := q[32*c : 32*c+32]
		yc := y[64*c : 64*c+64]
		for l := 0; l < 32; l++ {
			// Explicit conversions keep the multiply and subtract separately
			// rounded, as in ggml.
			yc[l] = float32(d1*float32(qc[l]&0xf)) - m1
			yc[l+32] = float32(d2*float32(qc[l]>>4)) - m2
		}
	}
}

// DequantizeQ6_KBlock decodes one 210-byte Q6_K super-block into 256 values.
func DequantizeQ6_KBlock(blk []byte, y []float32) {
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	d := half(blk[208:])
	y = y[:QK_K]
	for n := 0; n < 2; n++ {
		l0, h0, s0, y0 := ql[64*n:], qh[32*n:], sc[8*n:], y[128*n:]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(l0[l]&0xf|(h0[l]>>0&3)<<4) - 32
			q2 := int(l0[l+32]&0xf|(h0[l]>>2&3)<<4) - 32
			q3 := int(l0[l]>>4|(h0[l]>>4&3)<<4) - 32
			q4 := int(l0[l+32]>>4|(h0[l]>>6&3)<<4) - 32
			y0[l] = float32(d*float32(int8(s0[is]))) * float32(q1)
			y0[l+32] = float32(d*float32(int8(s0[is+2]))) * float32(q2)
			y0[l+64] = float32(d*float32(int8(s0[is+4]))) * float32(q3)
			y0[l+96] = float32(d*float32(int8(s0[is+6]))) * float32(q4)
		}
	}
}

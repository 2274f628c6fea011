//go:build amd64 && !purego

package kernels

import "unsafe"

// The tile kernels of attntile_amd64.s (attngen): attnQK<T>_<heads>x<blocks>
// and attnPV<T>_<heads>. Strides are in bytes.

//go:noescape
func attnQKF32_4x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_4x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_4x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_4x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnPVF32_4(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_1(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_4(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_1(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnQKF32_2x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_2x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnPVF32_2AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_1AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnQKF16_2x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_2x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnPVF16_2AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_1AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_4x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_1x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_4x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_1x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

// qkCall calls the AVX-512 (wide) or AVX2 QK kernel of nh heads and nb
// blocks: 4 or 1 of each, or 2 or 1.
func qkCall(wide, f16 bool, nh, nb int, q *float32, qstride int, k unsafe.Pointer, tab *int32, bb, hd int, out *float32, ostride int, scale float32) {
	type shape struct {
		wide, f16 bool
		nh, nb    int
	}
	switch (shape{wide, f16, nh, nb}) {
	case shape{true, false, 4, 4}:
		attnQKF32_4x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, false, 1, 4}:
		attnQKF32_1x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, false, 4, 1}:
		attnQKF32_4x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, false, 1, 1}:
		attnQKF32_1x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, true, 4, 4}:
		attnQKF16_4x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, true, 1, 4}:
		attnQKF16_1x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, true, 4, 1}:
		attnQKF16_4x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{true, true, 1, 1}:
		attnQKF16_1x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, false, 2, 2}:
		attnQKF32_2x2AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, false, 1, 2}:
		attnQKF32_1x2AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, false, 2, 1}:
		attnQKF32_2x1AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, false, 1, 1}:
		attnQKF32_1x1AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, true, 2, 2}:
		attnQKF16_2x2AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, true, 1, 2}:
		attnQKF16_1x2AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, true, 2, 1}:
		attnQKF16_2x1AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case shape{false, true, 1, 1}:
		attnQKF16_1x1AVX2(q, qstride, k, tab, bb, hd, out, ostride, scale)
	default:
		panic("kernels: no QK tile kernel of this shape")
	}
}

// pvCall calls the PV kernel of cols columns: AVX-512 (64: 4 or 1 heads)
// or AVX2 (32: 2 or 1 heads; 8: 4 or 1 heads).
func pvCall(cols int, f16 bool, nh int, p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int) {
	type shape struct {
		cols int
		f16  bool
		nh   int
	}
	switch (shape{cols, f16, nh}) {
	case shape{64, false, 4}:
		attnPVF32_4(p, pstride, v, vstride, cnt, out, ostride)
	case shape{64, false, 1}:
		attnPVF32_1(p, pstride, v, vstride, cnt, out, ostride)
	case shape{64, true, 4}:
		attnPVF16_4(p, pstride, v, vstride, cnt, out, ostride)
	case shape{64, true, 1}:
		attnPVF16_1(p, pstride, v, vstride, cnt, out, ostride)
	case shape{32, false, 2}:
		attnPVF32_2AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{32, false, 1}:
		attnPVF32_1AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{32, true, 2}:
		attnPVF16_2AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{32, true, 1}:
		attnPVF16_1AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{8, false, 4}:
		attnPVF32_4x8AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{8, false, 1}:
		attnPVF32_1x8AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{8, true, 4}:
		attnPVF16_4x8AVX2(p, pstride, v, vstride, cnt, out, ostride)
	case shape{8, true, 1}:
		attnPVF16_1x8AVX2(p, pstride, v, vstride, cnt, out, ostride)
	default:
		panic("kernels: no PV tile kernel of this shape")
	}
}

//go:noescape
func toHalfAVX2(dst *uint16, src *float32, n int)

func fmaLoopAVX512(n int)

func vnniLoopAVX512(n int)

func fmaLoopAVX2(n int)

//go:noescape
func dotQ8P1VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ8P2VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ8P3VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ8P4VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ8P5VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ8P6VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

// dotQ8P calls the packed Q8_0 kernel of rows activation rows (1 to 6).
func dotQ8P(rows int, w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
	switch rows {
	case 1:
		dotQ8P1VNNI(w, nb, x, xstride, meta, mstride, out)
	case 2:
		dotQ8P2VNNI(w, nb, x, xstride, meta, mstride, out)
	case 3:
		dotQ8P3VNNI(w, nb, x, xstride, meta, mstride, out)
	case 4:
		dotQ8P4VNNI(w, nb, x, xstride, meta, mstride, out)
	case 5:
		dotQ8P5VNNI(w, nb, x, xstride, meta, mstride, out)
	default:
		dotQ8P6VNNI(w, nb, x, xstride, meta, mstride, out)
	}
}

//go:noescape
func dotQ4P1VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ4P2VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ4P3VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ4P4VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ4P5VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

//go:noescape
func dotQ4P6VNNI(w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)

// dotQ4P calls the packed Q4_0 kernel of rows activation rows (1 to 6).
func dotQ4P(rows int, w *byte, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32) {
	switch rows {
	case 1:
		dotQ4P1VNNI(w, nb, x, xstride, meta, mstride, out)
	case 2:
		dotQ4P2VNNI(w, nb, x, xstride, meta, mstride, out)
	case 3:
		dotQ4P3VNNI(w, nb, x, xstride, meta, mstride, out)
	case 4:
		dotQ4P4VNNI(w, nb, x, xstride, meta, mstride, out)
	case 5:
		dotQ4P5VNNI(w, nb, x, xstride, meta, mstride, out)
	default:
		dotQ4P6VNNI(w, nb, x, xstride, meta, mstride, out)
	}
}

//go:noescape
func blockSumsI8AVX2(qs *int8, nb int, out *int32)

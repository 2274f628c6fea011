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

func qkCall(f16 bool, nh, nb int, q *float32, qstride int, k unsafe.Pointer, tab *int32, bb, hd int, out *float32, ostride int, scale float32) {
	switch {
	case !f16 && nh == 4 && nb == 4:
		attnQKF32_4x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case !f16 && nh == 1 && nb == 4:
		attnQKF32_1x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case !f16 && nh == 4:
		attnQKF32_4x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case !f16:
		attnQKF32_1x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case nh == 4 && nb == 4:
		attnQKF16_4x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case nh == 1 && nb == 4:
		attnQKF16_1x4(q, qstride, k, tab, bb, hd, out, ostride, scale)
	case nh == 4:
		attnQKF16_4x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	default:
		attnQKF16_1x1(q, qstride, k, tab, bb, hd, out, ostride, scale)
	}
}

func pvCall(f16 bool, nh int, p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int) {
	switch {
	case !f16 && nh == 4:
		attnPVF32_4(p, pstride, v, vstride, cnt, out, ostride)
	case !f16:
		attnPVF32_1(p, pstride, v, vstride, cnt, out, ostride)
	case nh == 4:
		attnPVF16_4(p, pstride, v, vstride, cnt, out, ostride)
	default:
		attnPVF16_1(p, pstride, v, vstride, cnt, out, ostride)
	}
}

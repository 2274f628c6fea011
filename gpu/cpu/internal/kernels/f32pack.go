package kernels

import (
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
)

// The packed F32 matrix multiply. At load an F32 matrix is repacked
// (PackF32) into panels of 16 rows, each panel K-major: for column k the 16
// rows' weights are 64 contiguous bytes, one ZMM register (two YMM halves),
// so a kernel multiplies a broadcast activation by 16 outputs' weights with
// one fused multiply-add and no reduction across lanes. The kernels
// (q8gen's f32.go: AVX-512 and AVX2, and the Go twin f32PGo) take up to 6
// activation rows × 4 panels a call, each output one multiply-add chain
// over k in order from 0, which a call can resume from partial sums in the
// output: so tileF32 can block K (a block of 4 panels stays in L2 while
// the activation rows pass it) and a row's bits stay those of one chain
// whatever M, the tiling or the threads; the three families give the same
// bits.
//
// The panels replace the row-major matrix (the backend drops Data):
// DequantizeRow reads a row from them (embedding lookups; the backend
// cannot tell a table read only by rows from a tied output matrix, and the
// panels cost no more bytes than the rows).
//
// F16 and BF16 weights could use the same panels (32 bytes a column of a
// panel, converted exactly to float32 in registers before the same
// chains), which is not done.

const (
	f32Panel  = 16   // weight rows per panel
	f32KBlock = 2048 // most columns of a block of 4 panels in one pass: 512 KiB
)

// f32Kernel is a packed F32 kernel (q8gen's f32.go): for activation rows
// i < rows and panels p < panels, c[i][16p+j] (c row i at c + i·cstride
// bytes) = its value (load ≠ 0) or 0, plus w_p[k][j]·x_i[k] for k < kn,
// one fused multiply-add at a time in order; w_p = w + p·pstride bytes, x_i
// = x + i·xstride bytes.
type f32Kernel func(w *float32, pstride, kn int, x *float32, xstride int, c *float32, cstride int, load int)

// f32Kernels is a family of packed F32 kernels, by rows − 1 and panels − 1.
type f32Kernels [q8MaxRows][f32MaxPanels]f32Kernel

const f32MaxPanels = 4

// f32Go are the Go twins.
var f32Go = func() f32Kernels {
	var k f32Kernels
	for r := 1; r <= q8MaxRows; r++ {
		for p := 1; p <= f32MaxPanels; p++ {
			k[r-1][p-1] = func(w *float32, pstride, kn int, x *float32, xstride int, c *float32, cstride int, load int) {
				f32PGo(r, p, w, pstride, kn, x, xstride, c, cstride, load)
			}
		}
	}
	return k
}()

// f32PGo is the twin of f32P<rows>x<panels>: fma32 is the kernels'
// VFMADD231PS.
func f32PGo(rows, panels int, w *float32, pstride, kn int, x *float32, xstride int, c *float32, cstride int, load int) {
	for i := 0; i < rows; i++ {
		xi := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(x), i*xstride)), kn)
		ci := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), i*cstride)), panels*f32Panel)
		for p := 0; p < panels; p++ {
			wp := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(w), p*pstride)), kn*f32Panel)
			for j := 0; j < f32Panel; j++ {
				var acc float32
				if load != 0 {
					acc = ci[f32Panel*p+j]
				}
				for k := 0; k < kn; k++ {
					acc = fma32(wp[f32Panel*k+j], xi[k], acc)
				}
				ci[f32Panel*p+j] = acc
			}
		}
	}
}

// f32Kernels returns the packed F32 kernels that run now: AVX-512 where the
// wide kernels run, else AVX2, else the Go twins (tests: mm.f32With).
func (mm *MatMul) f32Kernels() *f32Kernels {
	switch {
	case mm.f32With != nil:
		return mm.f32With
	case wideOn():
		return &f32AVX512
	case useAsm:
		return &f32AVX2
	}
	return &f32Go
}

// PackF32 returns w's rows in panels for the packed F32 kernels, or nil
// where they do not run (no AVX2 assembly, another type): ⌈Rows/16⌉ panels
// of Cols × 16 float32 (the last panel's missing rows zero), 64-byte
// aligned. It takes w's bytes but for the padding, and can replace w.Data
// (DequantizeRow and MatMul read the panels when Data is nil).
func PackF32(w *Weights) []byte {
	if w.Type != gpu.F32 || !useAsm || w.Rows == 0 || w.Cols == 0 {
		return nil
	}
	K := w.Cols
	panels := (w.Rows + f32Panel - 1) / f32Panel
	n := panels * K * f32Panel
	buf := make([]float32, n+16)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) % 64 / 4)
	p := buf[off : off+n : off+n]
	src := f32s(w.Data)
	parallelFor(panels, func(g int) {
		dst := p[g*K*f32Panel : (g+1)*K*f32Panel]
		rows := min(f32Panel, w.Rows-g*f32Panel) // padding rows stay zero
		blk := src[g*f32Panel*K : (g*f32Panel+rows)*K]
		for k0 := 0; k0 < K; k0 += 64 { // 16 rows × 64 columns at a time: 4 KiB in, 4 KiB out
			for j := 0; j < rows; j++ {
				row := blk[j*K : (j+1)*K]
				for k := k0; k < min(K, k0+64); k++ {
					dst[k*f32Panel+j] = row[k]
				}
			}
		}
	})
	return unsafe.Slice((*byte)(unsafe.Pointer(&p[0])), 4*n)
}

// packedF32Row copies row r of the panels pack of a matrix of K columns
// into dst[:K].
func packedF32Row(pack []byte, K, r int, dst []float32) {
	p := f32s(pack)[r/f32Panel*K*f32Panel:][:K*f32Panel]
	j := r % f32Panel
	for k := range dst[:K] {
		dst[k] = p[k*f32Panel+j]
	}
}

// tileF32 computes dst rows m0..m1, columns r0..r1 (r0 a multiple of 16)
// from the packed panels. Whole panels accumulate in dst itself, 4 at a
// time: each group of 4 panels (at most f32KBlock columns of them, 512 KiB,
// which stay in L2) meets every activation row, 6 at a time, each call
// running all of the block's columns (so the partial sums go to dst and
// back once a block; K ≤ f32KBlock is one block). A last partial panel
// goes through a scratch tile with all of K at once.
func (mm *MatMul) tileF32(r0, r1, m0, m1 int) {
	K, N := mm.cols, mm.rows
	k := mm.f32Kernels()
	pack, x, dst := f32s(mm.pack), mm.x, mm.dst
	pstride := K * f32Panel * 4
	pan0, full := r0/f32Panel, r1/f32Panel
	kb := K
	if n := (K + f32KBlock - 1) / f32KBlock; n > 1 && m1-m0 > q8MaxRows {
		kb = ((K+n-1)/n + 3) &^ 3 // n blocks of about the same size
	}
	for k0 := 0; k0 < K; k0 += kb {
		kn := min(kb, K-k0)
		load := 0
		if k0 > 0 {
			load = 1
		}
		for p := pan0; p < full; p += f32MaxPanels {
			np := min(f32MaxPanels, full-p)
			for m := m0; m < m1; m += q8MaxRows {
				rows := min(q8MaxRows, m1-m)
				k[rows-1][np-1](&pack[p*K*f32Panel+k0*f32Panel], pstride, kn,
					&x[m*K+k0], 4*K, &dst[m*N+p*f32Panel], 4*N, load)
			}
		}
	}
	if full*f32Panel < r1 {
		var o [q8MaxRows * f32Panel]float32
		cols := r1 - full*f32Panel
		for m := m0; m < m1; m += q8MaxRows {
			rows := min(q8MaxRows, m1-m)
			k[rows-1][0](&pack[full*K*f32Panel], pstride, K, &x[m*K], 4*K, &o[0], 4*f32Panel, 0)
			for i := 0; i < rows; i++ {
				copy(dst[(m+i)*N+full*f32Panel:][:cols], o[i*f32Panel:])
			}
		}
	}
}

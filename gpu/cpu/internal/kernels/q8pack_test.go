package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// TestMatMulPacked checks the packed Q8_0, Q4_0, Q4_K and Q6_K paths against the
// reference product, and that a row's result has the same bits alone, in
// any batch, on one thread or two: every row goes through the same kernel
// operations.
func TestMatMulPacked(t *testing.T) {
	if !useAsm || !hasVNNI {
		t.Skip("no AVX512-VNNI")
	}
	r := rand.New(rand.NewPCG(8, 8))
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, shape := range [][3]int{
			{16, 64, 8}, {37, 96, 8}, {200, 768, 8}, {770, 256, 8}, {16, 64, 2}, {37, 96, 2}, {200, 768, 2},
			{16, 256, 12}, {37, 512, 12}, {200, 768, 12}, {16, 256, 14}, {37, 512, 14}, {200, 768, 14}, {770, 256, 14},
		} {
			N, K, ty := shape[0], shape[1], gpu.DType(shape[2])
			w := &Weights{Type: ty, Rows: N, Cols: K, Data: mustQuantize(t, ty, randFloats(r, N*K))}
			switch ty {
			case gpu.Q4_0:
				w.Pack = PackQ4_0(w)
			case gpu.Q4_K:
				w.Pack = PackQ4_K(w)
			case gpu.Q6_K:
				w.Pack = PackQ6_K(w)
			default:
				w.Pack = PackQ8_0(w)
			}
			if w.Pack == nil {
				t.Fatal("not packed")
			}
			mm := NewMatMul(p)
			const M = 23
			x := randFloats(r, M*K)
			dst := make([]float32, M*N)
			mm.Run(dst, x, M, w)
			ref, tol := refMatMul(t, w, x, M)
			for i := range ref {
				if math.Abs(float64(dst[i])-ref[i]) > tol[i] {
					t.Fatalf("%v %d×%d: out[%d] = %g, want %g ± %g", ty, N, K, i, dst[i], ref[i], tol[i])
				}
			}
			// Unpacked, the same products within rounding (the K-quants'
			// row-major kernels take the same Q8_K activations).
			plain := make([]float32, M*N)
			NewMatMul(p).Run(plain, x, M, &Weights{Type: ty, Rows: N, Cols: K, Data: w.Data})
			for i := range plain {
				// Q4_0's row-major kernel quantizes activations otherwise
				// (in pairs of blocks), within the reference's tolerance.
				if d := math.Abs(float64(dst[i] - plain[i])); ty != gpu.Q4_0 && d > 1e-4*(1+math.Abs(float64(plain[i]))) {
					t.Fatalf("%v %d×%d: packed %g, row-major %g", ty, N, K, dst[i], plain[i])
				}
			}
			for _, m := range []int{0, 5, 22} {
				for _, sub := range []int{1, 4, 7} {
					lo := max(0, min(m, M-sub))
					one := make([]float32, sub*N)
					mm.Run(one, x[lo*K:(lo+sub)*K], sub, w)
					for i, v := range one {
						if math.Float32bits(v) != math.Float32bits(dst[lo*N+i]) {
							t.Fatalf("%d×%d, %d threads: row %d in a batch of %d: %g, in %d: %g", N, K, threads, lo+i/N, sub, v, M, dst[lo*N+i])
						}
					}
				}
			}
		}
		p.Close()
	}
}

// TestBlockSums checks the block sums against a loop, extremes included.
func TestBlockSums(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	qs := make([]int8, 32*70)
	for i := range qs {
		qs[i] = int8(r.Uint32())
	}
	for i := 0; i < 32; i++ {
		qs[i], qs[32+i] = -128, 127
	}
	got := make([]int32, 70)
	blockSums(qs, got)
	for b := range got {
		var s int32
		for _, v := range qs[b*32 : (b+1)*32] {
			s += int32(v)
		}
		if got[b] != s {
			t.Fatalf("block %d: %d, want %d", b, got[b], s)
		}
	}
}

// TestMeasurePeak: with the assembly, both peaks are measured (the int8
// one by VNNI or by the AVX2 idiom) and are plausible: more than 1 G
// multiply-adds a second, and an int8 rate no lower than a tenth of F32's.
func TestMeasurePeak(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels")
	}
	p := MeasurePeak()
	if p.F32 < 1e9 || p.Int8 < 1e9 || p.Int8 < p.F32/10 {
		t.Fatalf("peak %+v", p)
	}
}

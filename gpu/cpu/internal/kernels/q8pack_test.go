package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// TestMatMulPackedQ8_0 checks the packed Q8_0 path against the reference
// product, and that a row's result has the same bits alone, in any batch,
// on one thread or two: every row goes through the same kernel operations.
func TestMatMulPackedQ8_0(t *testing.T) {
	if !useAsm || !hasVNNI {
		t.Skip("no AVX512-VNNI")
	}
	r := rand.New(rand.NewPCG(8, 8))
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, shape := range [][2]int{{16, 64}, {37, 96}, {200, 768}, {770, 256}} {
			N, K := shape[0], shape[1]
			w := &Weights{Type: gpu.Q8_0, Rows: N, Cols: K, Data: mustQuantize(t, gpu.Q8_0, randFloats(r, N*K))}
			w.Pack = PackQ8_0(w)
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
					t.Fatalf("%d×%d: out[%d] = %g, want %g ± %g", N, K, i, dst[i], ref[i], tol[i])
				}
			}
			// Unpacked, the same products within rounding.
			plain := make([]float32, M*N)
			NewMatMul(p).Run(plain, x, M, &Weights{Type: gpu.Q8_0, Rows: N, Cols: K, Data: w.Data})
			for i := range plain {
				if d := math.Abs(float64(dst[i] - plain[i])); d > 1e-4*(1+math.Abs(float64(plain[i]))) {
					t.Fatalf("%d×%d: packed %g, row-major %g", N, K, dst[i], plain[i])
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

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// f32Families are the packed F32 kernel families this machine runs.
func f32Families() map[string]*f32Kernels {
	f := map[string]*f32Kernels{"go": &f32Go}
	if useAsm {
		f["avx2"] = &f32AVX2
	}
	if useAsm && hasWide {
		f["avx512"] = &f32AVX512
	}
	return f
}

// f32Chain is the definition of a packed F32 product, written apart from
// the kernels: one fused multiply-add chain over k in order from 0.
func f32Chain(w, x []float32) float32 {
	var acc float32
	for k := range w {
		acc = fma32(w[k], x[k], acc)
	}
	return acc
}

// TestMatMulPackedF32 checks the packed F32 path: every output is exactly
// the chain f32Chain (which is the exact product within a recursive sum's
// error bound),
// every family (Go twin, AVX2, AVX-512) gives those bits, and a row's bits
// are the same alone (decode), in any batch, on one thread or two, the
// panels read back as rows give the matrix, and Data may be dropped.
func TestMatMulPackedF32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 7))
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, shape := range [][2]int{
			{16, 64}, {37, 96}, {5, 33}, {200, 768}, {130, 517}, {770, 256}, {64, 300}, {300, 1030}, {40, 4100},
		} {
			N, K := shape[0], shape[1]
			wf := randFloats(r, N*K)
			data := make([]byte, 4*N*K)
			copy(f32s(data), wf)
			w := &Weights{Type: gpu.F32, Rows: N, Cols: K, Data: data}
			withAsm(true, func() { w.Pack = PackF32(w) }) // packed without the assembly too, for the Go twins
			if w.Pack == nil {
				t.Fatal("not packed")
			}
			row := make([]float32, K)
			packed := &Weights{Type: gpu.F32, Rows: N, Cols: K, Pack: w.Pack}
			for i := 0; i < N; i++ {
				DequantizeRow(packed, i, row)
				for k, v := range row {
					if v != wf[i*K+k] {
						t.Fatalf("%d×%d: row %d read from the panels: [%d] = %g, want %g", N, K, i, k, v, wf[i*K+k])
					}
				}
			}
			const M = 23
			x := randFloats(r, M*K)
			want := make([]float32, M*N)
			for m := 0; m < M; m++ {
				for n := 0; n < N; n++ {
					want[m*N+n] = f32Chain(wf[n*K:(n+1)*K], x[m*K:(m+1)*K])
				}
			}
			// The chain against the exact product, within the bound of a
			// recursive sum of K terms: γ_K·Σ|w·x|, γ_K = Ku/(1−Ku).
			u := math.Ldexp(1, -24)
			gamma := float64(K) * u / (1 - float64(K)*u)
			for m := 0; m < M; m++ {
				for n := 0; n < N; n++ {
					var exact, abs float64
					for k := 0; k < K; k++ {
						p := float64(wf[n*K+k]) * float64(x[m*K+k])
						exact, abs = exact+p, abs+math.Abs(p)
					}
					if d := math.Abs(float64(want[m*N+n]) - exact); d > gamma*abs {
						t.Fatalf("%d×%d: the chain %g, the exact product %g (bound %g)", N, K, want[m*N+n], exact, gamma*abs)
					}
				}
			}
			for name, k := range f32Families() {
				for _, ww := range []*Weights{w, packed} {
					mm := NewMatMul(p)
					mm.f32With = k
					all := make([]float32, M*N)
					mm.Run(all, x, M, ww)
					for i := range all {
						if math.Float32bits(all[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%d×%d, %s kernels, %d threads: out[%d] = %g, the chain's %g", N, K, name, threads, i, all[i], want[i])
						}
					}
					for _, m := range []int{0, 5, 22} {
						for _, sub := range []int{1, 2, 4, 7, 13} {
							lo := max(0, min(m, M-sub))
							one := make([]float32, sub*N)
							mm.Run(one, x[lo*K:(lo+sub)*K], sub, ww)
							for i, v := range one {
								if math.Float32bits(v) != math.Float32bits(want[lo*N+i]) {
									t.Fatalf("%d×%d, %s kernels, %d threads: row %d in a batch of %d: %g, the chain's %g",
										N, K, name, threads, lo+i/N, sub, v, want[lo*N+i])
								}
							}
						}
					}
				}
			}
			if useAsm { // the kernels that run by default, on a long batch (K blocks, L2 groups)
				const L = 100
				xl := randFloats(r, L*K)
				got := make([]float32, L*N)
				NewMatMul(p).Run(got, xl, L, w)
				for _, m := range []int{0, 37, 99} {
					for n := 0; n < N; n++ {
						if c := f32Chain(wf[n*K:(n+1)*K], xl[m*K:(m+1)*K]); math.Float32bits(got[m*N+n]) != math.Float32bits(c) {
							t.Fatalf("%d×%d, batch of %d, %d threads: out[%d][%d] = %g, the chain's %g", N, K, L, threads, m, n, got[m*N+n], c)
						}
					}
				}
			}
		}
		p.Close()
	}
}

// TestF32KernelsMatchGo compares every packed F32 kernel of every family
// the CPU runs, at every row and panel count, with its Go twin bit for bit:
// values of many magnitudes (so that roundings differ if an operation
// does), K lengths through the unrolled loop and its tail, from zero or
// from partial sums; and checks that nothing around the outputs is
// written.
func TestF32KernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	val := func() float32 {
		return float32((r.Float64()*2 - 1) * math.Ldexp(1, r.IntN(40)-20))
	}
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = val()
		}
		return v
	}
	for name, fam := range f32Families() {
		if name == "go" {
			continue
		}
		for rows := 1; rows <= q8MaxRows; rows++ {
			for panels := 1; panels <= f32MaxPanels; panels++ {
				for _, kn := range []int{0, 1, 3, 4, 5, 8, 13, 64, 259} {
					for load := 0; load < 2; load++ {
						kp := kn + 3 // panel stride with room
						w := fill(f32MaxPanels * kp * f32Panel)
						xs := kn + 2
						x := fill(q8MaxRows * xs)
						cs := f32MaxPanels*f32Panel + 5 // c row stride, with guards between rows
						c0 := fill(q8MaxRows * cs)
						got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
						fam[rows-1][panels-1](&w[0], 4*kp*f32Panel, kn, &x[0], 4*xs, &got[0], 4*cs, load)
						f32PGo(rows, panels, &w[0], 4*kp*f32Panel, kn, &x[0], 4*xs, &want[0], 4*cs, load)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s f32P%dx%d, kn %d, load %d: c[%d] = %g, the Go twin's %g", name, rows, panels, kn, load, i, got[i], want[i])
							}
						}
						for i := 0; i < rows; i++ { // the twin wrote only the outputs; check it did
							for j := panels * f32Panel; j < cs; j++ {
								if want[i*cs+j] != c0[i*cs+j] {
									t.Fatalf("Go twin wrote outside the outputs")
								}
							}
						}
					}
				}
			}
		}
	}
}

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu/quant"
)

// The row kernels agree with their Go twins, for row counts that exercise
// the 8-, 4- and 1-row steps and lengths with and without a Go tail.
func TestRowKernelsMatchGo(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{1, 5, 8, 12, 16, 19, 24, 64, 128, 172, 200} {
		for _, n := range []int{1, 3, 4, 5, 7, 8, 9, 13, 16, 31, 40} {
			stride := k + r.IntN(3)*8 + r.IntN(2)
			x := randFloats(r, k)
			w := randFloats(r, (n-1)*stride+k)
			var got, want []float32
			for _, asm := range []bool{true, false} {
				out := make([]float32, n)
				withAsm(asm, func() { DotRows(x, w, stride, 0.37, out) })
				if asm {
					got = out
				} else {
					want = out
				}
			}
			for i := range got {
				if !closeTo(got[i], want[i], 0.37*absDot(x, w[i*stride:i*stride+k]), 1e-6) {
					t.Fatalf("DotRows k=%d n=%d stride %d row %d: asm %g, go %g", k, n, stride, i, got[i], want[i])
				}
			}

			p := randFloats(r, n)
			base := randFloats(r, k)
			var ga, wa []float32
			for _, asm := range []bool{true, false} {
				out := append([]float32(nil), base...)
				withAsm(asm, func() { AxpyRows(p, w, stride, out) })
				if asm {
					ga = out
				} else {
					wa = out
				}
			}
			for i := range ga {
				s := math.Abs(float64(base[i]))
				for j := range p {
					s += math.Abs(float64(p[j]) * float64(w[j*stride+i]))
				}
				if !closeTo(ga[i], wa[i], s, 1e-6) {
					t.Fatalf("AxpyRows k=%d n=%d stride %d elem %d: asm %g, go %g", k, n, stride, i, ga[i], wa[i])
				}
			}
		}
	}
}

func TestMaxAndExpShift(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 16, 23, 24, 33, 100, 257} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 20)
		}
		if n > 2 {
			x[n/2] = -200 // below the cutoff
			x[1] = -86.9
		}
		want := float32(math.Inf(-1))
		for _, v := range x {
			want = max(want, v)
		}
		for _, asm := range []bool{true, false} {
			if asm && !useAsm {
				continue
			}
			var m, sum float32
			y := append(append([]float32(nil), x...), 42)
			withAsm(asm, func() {
				m = Max(y[:n])
				sum = ExpShift(y[:n], m)
			})
			if y[n] != 42 {
				t.Fatalf("n=%d asm=%v: wrote past the end", n, asm)
			}
			if m != want {
				t.Fatalf("n=%d asm=%v: max %g, want %g", n, asm, m, want)
			}
			var ref float64
			for i, v := range x {
				z := float64(v - m) // the subtraction rounds in float32
				e := math.Exp(z)
				if z < -87 {
					e = 0
				}
				ref += e
				if d := math.Abs(float64(y[i]) - e); d > 4e-7*e && d > 1e-37 {
					t.Fatalf("n=%d asm=%v: exp(%g) = %g, want %g (rel %g)", n, asm, v-m, y[i], e, d/e)
				}
			}
			if d := math.Abs(float64(sum) - ref); d > 1e-6*ref {
				t.Fatalf("n=%d asm=%v: sum %g, want %g", n, asm, sum, ref)
			}
		}
	}
}

// Clean and ArgMax against a scalar reference: NaN, ±Inf, ties for the
// maximum (the first wins) anywhere, all −Inf, and nothing written past
// len(src).
func TestCleanArgMax(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 32000} {
		for trial := range 20 {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			for range min(n, 3) {
				switch i := r.IntN(n); trial % 5 {
				case 0:
					src[i] = nan
				case 1:
					src[i] = inf
				case 2:
					src[i] = -inf
				case 3: // a tie with the current maximum, before or after it
					src[i] = src[r.IntN(n)] + 10
					src[r.IntN(n)] = src[i]
				case 4:
					for j := range src {
						src[j] = -inf
					}
					src[i] = nan
				}
			}
			want := make([]float32, n)
			wantI, wantM := 0, float32(math.Inf(-1))
			for i, v := range src {
				switch {
				case v != v:
					v = -inf
				case v > math.MaxFloat32:
					v = math.MaxFloat32
				}
				want[i] = v
				if v > wantM {
					wantI, wantM = i, v
				}
			}
			for _, asm := range []bool{true, false} {
				if asm && !useAsm {
					continue
				}
				dst := make([]float32, n+1)
				dst[n] = 42
				var i, a int
				var m float32
				withAsm(asm, func() {
					i, m = Clean(dst, src)
					a = ArgMax(dst[:n])
				})
				if dst[n] != 42 {
					t.Fatalf("n=%d asm=%v: wrote past the end", n, asm)
				}
				for j := range want {
					if math.Float32bits(dst[j]) != math.Float32bits(want[j]) {
						t.Fatalf("n=%d asm=%v: dst[%d] = %g from %g, want %g", n, asm, j, dst[j], src[j], want[j])
					}
				}
				if i != wantI || m != wantM || a != wantI {
					t.Fatalf("n=%d trial %d asm=%v: Clean = %d, %g and ArgMax = %d, want %d, %g", n, trial, asm, i, m, a, wantI, wantM)
				}
			}
		}
	}
}

// SumExp, with and without dst, scaled and not, against float64: every
// term, the sum, −Inf and far-below-cutoff inputs, and nothing written past
// len(x) or anything written when dst is nil.
func TestSumExp(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	inf := float32(math.Inf(-1))
	for _, n := range []int{0, 1, 7, 8, 9, 16, 23, 100, 257, 32000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 8)
		}
		if n > 3 {
			x[n/2], x[1], x[n-1] = inf, -300, inf
		}
		m := Max(x)
		for _, scale := range []float32{1, 1 / 0.7} {
			for _, asm := range []bool{true, false} {
				if asm && !useAsm {
					continue
				}
				for _, withDst := range []bool{false, true} {
					var dst []float32
					if withDst {
						dst = make([]float32, n+1)
						dst[n] = 42
					}
					src := append([]float32(nil), x...)
					var sum float64
					withAsm(asm, func() { sum = SumExp(dst, src, m, scale) })
					var ref float64
					for i, v := range x {
						if src[i] != v && !(v != v) {
							t.Fatalf("n=%d asm=%v: x[%d] changed", n, asm, i)
						}
						z := float64((v - m) * scale)
						e := math.Exp(z)
						if z < -87 {
							e = 0
						}
						ref += e
						if withDst {
							if d := math.Abs(float64(dst[i]) - e); d > 4e-7*e && d > 1e-37 {
								t.Fatalf("n=%d asm=%v scale=%g: term %d = %g, want %g", n, asm, scale, i, dst[i], e)
							}
						}
					}
					if withDst && dst[n] != 42 {
						t.Fatalf("n=%d asm=%v: wrote past the end", n, asm)
					}
					if d := math.Abs(sum - ref); d > 3e-7*ref {
						t.Fatalf("n=%d asm=%v scale=%g dst=%v: sum %g, want %g (rel %g)", n, asm, scale, withDst, sum, ref, d/ref)
					}
				}
			}
		}
	}
}

// ExpShift over the whole useful range, against float64.
func TestExpShiftAccuracy(t *testing.T) {
	const n = 1 << 16
	x := make([]float32, n)
	for i := range x {
		x[i] = -87 * float32(i) / n
	}
	for _, asm := range []bool{true, false} {
		if asm && !useAsm {
			continue
		}
		y := append([]float32(nil), x...)
		withAsm(asm, func() { ExpShift(y, 0) })
		worst := 0.0
		for i, v := range x {
			e := math.Exp(float64(v))
			if e < 1e-37 {
				continue
			}
			worst = max(worst, math.Abs(float64(y[i])-e)/e)
		}
		if worst > 2.5e-7 {
			t.Errorf("asm=%v: worst relative error %g", asm, worst)
		}
	}
}

func TestSiLUMul(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 8, 9, 31, 64, 172, 2048} {
		g := make([]float32, n)
		for i := range g {
			g[i] = float32(r.NormFloat64() * 8)
		}
		g[0] = 0
		if n > 4 {
			g[1], g[2], g[3] = -100, 100, float32(math.Copysign(0, -1))
		}
		u := randFloats(r, n)
		for _, asm := range []bool{true, false} {
			if asm && !useAsm {
				continue
			}
			dst := make([]float32, n)
			withAsm(asm, func() { SiLUMul(dst, g, u) })
			for i := range dst {
				x := float64(g[i])
				want := x / (1 + math.Exp(-x)) * float64(u[i])
				if d := math.Abs(float64(dst[i]) - want); d > 1e-6*math.Abs(want)+1e-30 {
					t.Fatalf("n=%d asm=%v: silu(%g)·%g = %g, want %g", n, asm, g[i], u[i], dst[i], want)
				}
			}
			// In place.
			y := append([]float32(nil), g...)
			withAsm(asm, func() { SiLUMul(y, y, u) })
			for i := range y {
				if y[i] != dst[i] {
					t.Fatalf("n=%d asm=%v: in place %g, want %g", n, asm, y[i], dst[i])
				}
			}
		}
	}
}

// The 4×3 tile kernels agree with their Go twins.
func TestTileKernelsMatchGo(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 7, 8, 16, 24, 63, 64, 100, 768} {
		xs, ws := n+3, n+5
		x := randFloats(r, 4*xs)
		w := randFloats(r, 3*ws)
		f16 := make([]uint16, len(w))
		bf16 := make([]uint16, len(w))
		for i, v := range w {
			f16[i] = quant.Float32ToFP16(v)
			bf16[i] = quant.Float32ToBF16(v)
		}
		for _, kind := range []string{"f32", "f16", "bf16"} {
			var got, want [12]float32
			run := func(out *[12]float32) {
				switch kind {
				case "f32":
					dotF32x4x3(x, xs, w, ws, n, out)
				case "f16":
					dotF16x4x3(x, xs, f16, ws, n, out)
				case "bf16":
					dotBF16x4x3(x, xs, bf16, ws, n, out)
				}
			}
			withAsm(true, func() { run(&got) })
			withAsm(false, func() { run(&want) })
			for i := 0; i < 4; i++ {
				for j := 0; j < 3; j++ {
					scale := absDot(x[i*xs:i*xs+n], w[j*ws:j*ws+n])
					if !closeTo(got[3*i+j], want[3*i+j], scale, 1e-6) {
						t.Fatalf("%s n=%d [%d,%d]: asm %g, go %g", kind, n, i, j, got[3*i+j], want[3*i+j])
					}
				}
			}
		}
	}
}

// The assembly quantizers produce exactly the Go twins' bytes.
func TestQuantizeMatchesGo(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, nb := range []int{1, 2, 3, 8, 24, 65} {
		x := randFloats(r, nb*qk8)
		for i := range x {
			switch r.IntN(20) {
			case 0:
				x[i] = 0
			case 1:
				x[i] *= 1e-40 // denormal
			case 2:
				x[i] = float32(r.IntN(255)-127) / 2 // halves
			}
		}
		for j := 0; j < qk8; j++ {
			x[j] = 0 // an all-zero block
		}
		if nb > 1 {
			for j := qk8; j < 2*qk8; j++ {
				x[j] = 1e-44 // amax/127 underflows to 0
			}
		}
		q1, q2 := make([]int8, len(x)), make([]int8, len(x))
		d1, d2 := make([]float32, nb), make([]float32, nb)
		withAsm(true, func() { quantizeQ8_0(x, q1, d1) })
		quantizeQ8_0Go(x, q2, d2)
		for i := range q1 {
			if q1[i] != q2[i] {
				t.Fatalf("nb=%d: q[%d] = %d, want %d (x %g, d %g)", nb, i, q1[i], q2[i], x[i], d2[i/qk8])
			}
		}
		for i := range d1 {
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
				t.Fatalf("nb=%d: d[%d] = %g, want %g", nb, i, d1[i], d2[i])
			}
		}
		p1, p2 := make([]pairQ4, (nb+1)/2), make([]pairQ4, (nb+1)/2)
		for i := range p1 {
			p1[i].lo[31], p1[i].corr[7] = 5, 5 // stale data must be overwritten
		}
		withAsm(true, func() { quantizeQ4Pairs(x, p1) })
		quantizeQ4PairsGo(x, p2)
		for i := range p1 {
			if p1[i] != p2[i] {
				t.Fatalf("nb=%d: pair %d = %+v, want %+v", nb, i, p1[i], p2[i])
			}
		}
	}
}

// The assembly Q8_K quantizer produces exactly the Go twin's blocks:
// zeros, denormals, halves, an all-zero super-block, one whose inverse
// scale overflows, stale data overwritten.
func TestQuantizeQ8KMatchesGo(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(15, 16))
	for _, nb := range []int{1, 2, 3, 8} {
		x := randFloats(r, nb*qkK)
		for i := range x {
			switch r.IntN(20) {
			case 0:
				x[i] = 0
			case 1:
				x[i] *= 1e-40
			case 2:
				x[i] = float32(r.IntN(255)-127) / 2
			}
		}
		if nb > 1 {
			clear(x[:qkK])
			for j := qkK; j < 2*qkK; j++ {
				x[j] = 1e-44 * float32(j%3-1)
			}
		}
		b1, b2 := make([]blockQ8K, nb), make([]blockQ8K, nb)
		for i := range b1 {
			b1[i].qs[7], b1[i].bsums[3], b1[i].d = 9, 9, 9
		}
		withAsm(true, func() { quantizeQ8K(x, b1) })
		quantizeQ8KGo(x, b2)
		for i := range b1 {
			if b1[i] != b2[i] {
				t.Fatalf("nb=%d: block %d = %+v,\nwant %+v", nb, i, b1[i], b2[i])
			}
		}
	}
}

func TestRowKernelsEmpty(t *testing.T) {
	out := []float32{1, 2}
	DotRows(nil, nil, 0, 1, out)
	dotRowsF16(nil, nil, 0, out[:1])
	if out[0] != 0 || out[1] != 0 {
		t.Fatalf("empty rows: %v", out)
	}
	AxpyRows(nil, nil, 0, out)
	if Max(nil) != float32(math.Inf(-1)) || ExpShift(nil, 0) != 0 {
		t.Fatal("empty max or exp")
	}
}

// firstOf against a scan, the match at every position of slices of every
// length up to 80 (the assembly's rounds of 32, vectors of 8 and the Go
// tail), with a later copy of it, and with none (0).
func TestFirstOf(t *testing.T) {
	for _, asm := range []bool{true, false} {
		if asm && !useAsm {
			continue
		}
		for n := 1; n <= 80; n++ {
			for p := -1; p < n; p++ {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(i % 7)
				}
				want := 0
				if p >= 0 {
					x[p] = 9
					if q := p + 1 + (n-p-1)/2; q < n {
						x[q] = 9
					}
					want = p
				}
				var got int
				withAsm(asm, func() { got = firstOf(x, 9) })
				if got != want {
					t.Fatalf("asm=%v n=%d: first 9 at %d, want %d", asm, n, got, want)
				}
			}
		}
	}
}

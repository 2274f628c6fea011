package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

func randFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func mustQuantize(t testing.TB, ty gpu.DType, x []float32) []byte {
	b, err := quant.Quantize(ty, x)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withAsm runs f with useAsm set to v.
func withAsm(v bool, f func()) {
	old := useAsm
	useAsm = v
	defer func() { useAsm = old }()
	f()
}

func needAsm(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels on this CPU/architecture")
	}
}

// close reports whether a and b agree within tol·scale.
func closeTo(a, b float32, scale, tol float64) bool {
	return math.Abs(float64(a)-float64(b)) <= tol*scale+1e-30
}

func absDot(x, w []float32) float64 {
	var s float64
	for i := range x {
		s += math.Abs(float64(x[i]) * float64(w[i]))
	}
	return s
}

func dequant(t testing.TB, ty gpu.DType, b []byte, n int) []float32 {
	y := make([]float32, n)
	if err := quant.Dequantize(ty, b, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// The float kernels agree with their Go twins on random data of lengths
// that exercise the 32/16/8 steps and the Go tails.
func TestFloatKernelsMatchGo(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 7, 8, 16, 24, 40, 63, 64, 100, 777, 2048} {
		x := randFloats(r, 4*n+3)
		w := randFloats(r, n)
		f16 := make([]uint16, n)
		bf16 := make([]uint16, n)
		for i, v := range w {
			f16[i] = quant.Float32ToFP16(v)
			bf16[i] = quant.Float32ToBF16(v)
		}
		xs := n + 1
		for i := 0; i < 4; i++ {
			xi := x[i*xs : i*xs+n]
			scale := absDot(xi, w)
			var gf, gh, gb, wf, wh, wb float32
			withAsm(true, func() { gf, gh, gb = dotF32(xi, w), dotF16(xi, f16), dotBF16(xi, bf16) })
			withAsm(false, func() { wf, wh, wb = dotF32(xi, w), dotF16(xi, f16), dotBF16(xi, bf16) })
			if !closeTo(gf, wf, scale, 1e-6) || !closeTo(gh, wh, scale, 1e-6) || !closeTo(gb, wb, scale, 1e-6) {
				t.Fatalf("n=%d row %d: asm %g %g %g, go %g %g %g", n, i, gf, gh, gb, wf, wh, wb)
			}
		}
		var o1, o2 [4]float32
		for _, kind := range []string{"f32", "f16", "bf16"} {
			run := func(out *[4]float32) {
				switch kind {
				case "f32":
					dotF32x4(x, xs, w, out)
				case "f16":
					dotF16x4(x, xs, f16, out)
				case "bf16":
					dotBF16x4(x, xs, bf16, out)
				}
			}
			withAsm(true, func() { run(&o1) })
			withAsm(false, func() { run(&o2) })
			for i := range o1 {
				if !closeTo(o1[i], o2[i], absDot(x[i*xs:i*xs+n], w), 1e-6) {
					t.Fatalf("%s x4 n=%d row %d: asm %g, go %g", kind, n, i, o1[i], o2[i])
				}
			}
		}
		var s1, s2 float32
		withAsm(true, func() { s1 = sumF32(x) })
		withAsm(false, func() { s2 = sumF32(x) })
		if !closeTo(s1, s2, float64(len(x)), 1e-6) {
			t.Fatalf("sum n=%d: asm %g, go %g", len(x), s1, s2)
		}
	}
}

// Activations for the quantized kernels.
type testAct struct {
	q  []int8
	d  []float32
	p  []pairQ4 // rows of q4Pairs(K)
	kb []blockQ8K
	x  []float32 // the dequantized activations
}

// makeAct quantizes rows of K elements.
func makeAct(x []float32, K int) testAct {
	a := testAct{q: make([]int8, len(x)), d: make([]float32, len(x)/qk8), x: make([]float32, len(x))}
	quantizeQ8_0(x, a.q, a.d)
	np := q4Pairs(K)
	a.p = make([]pairQ4, len(x)/K*np)
	for m := 0; m < len(x)/K; m++ {
		quantizeQ4Pairs(x[m*K:(m+1)*K], a.p[m*np:(m+1)*np])
	}
	if len(x)%qkK == 0 {
		a.kb = make([]blockQ8K, len(x)/qkK)
		quantizeQ8K(x, a.kb)
	}
	return a
}

func (a testAct) deq(kind gpu.DType) []float32 {
	x := make([]float32, len(a.q))
	if actKind(kind) == actQ8K {
		for b := range a.kb {
			for l := 0; l < qkK; l++ {
				x[b*qkK+l] = float32(a.kb[b].qs[l]) * a.kb[b].d
			}
		}
		return x
	}
	for i := range x {
		x[i] = float32(a.q[i]) * a.d[i/qk8]
	}
	return x
}

func quantDot1(ty gpu.DType, w []byte, a testAct, nb int) float32 {
	switch ty {
	case gpu.Q8_0:
		return dotQ8_0(w, a.q, a.d, nb)
	case gpu.Q4_0:
		return dotQ4_0(w, a.p, nb)
	case gpu.Q4_K:
		return dotQ4_K(w, a.kb, nb)
	case gpu.Q6_K:
		return dotQ6_K(w, a.kb, nb)
	case gpu.Q4_1:
		return dotQ4_1(w, a.q, a.d, nb)
	case gpu.Q5_0:
		return dotQ5_0(w, a.q, a.d, nb)
	case gpu.Q5_1:
		return dotQ5_1(w, a.q, a.d, nb)
	case gpu.Q2_K:
		return dotQ2_K(w, a.kb, nb)
	case gpu.Q3_K:
		return dotQ3_K(w, a.kb, nb)
	case gpu.Q5_K:
		return dotQ5_K(w, a.kb, nb)
	}
	panic(ty)
}

// quantDot4 uses rows 0..3 of a at a stride of nb blocks.
func quantDot4(ty gpu.DType, w []byte, a testAct, nb int, out *[4]float32) {
	K := nb * ty.BlockSize()
	switch ty {
	case gpu.Q8_0:
		dotQ8_0x4(w, a.q, K, a.d, K/qk8, nb, out)
	case gpu.Q4_0:
		dotQ4_0x4(w, a.p, q4Pairs(K), nb, out)
	case gpu.Q4_K:
		dotQ4_Kx4(w, a.kb, K/qkK, nb, out)
	case gpu.Q6_K:
		dotQ6_Kx4(w, a.kb, K/qkK, nb, out)
	case gpu.Q4_1:
		dotQ8x4(dotQ4_1, w, a.q, K, a.d, K/qk8, nb, out)
	case gpu.Q5_0:
		dotQ8x4(dotQ5_0, w, a.q, K, a.d, K/qk8, nb, out)
	case gpu.Q5_1:
		dotQ8x4(dotQ5_1, w, a.q, K, a.d, K/qk8, nb, out)
	case gpu.Q2_K:
		dotQ8Kx4(dotQ2_K, w, a.kb, K/qkK, nb, out)
	case gpu.Q3_K:
		dotQ3_Kx4(w, a.kb, K/qkK, nb, out)
	case gpu.Q5_K:
		dotQ5_Kx4(w, a.kb, K/qkK, nb, out)
	}
}

var quantTypes = []gpu.DType{gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K, gpu.Q4_1, gpu.Q5_0, gpu.Q5_1, gpu.Q2_K, gpu.Q3_K, gpu.Q5_K}

// The quantized kernels agree with their Go twins on random data.
func TestQuantKernelsMatchGo(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(2, 2))
	for _, ty := range quantTypes {
		for _, nb := range []int{1, 2, 3, 4, 5, 8} {
			K := nb * ty.BlockSize()
			w := mustQuantize(t, ty, randFloats(r, K))
			x := randFloats(r, 4*K)
			for i := range x {
				if i%97 == 3 {
					x[i] *= 20 // outliers
				}
			}
			a := makeAct(x, K)
			wf := dequant(t, ty, w, K)
			xf := a.deq(ty)
			var o1, o2 [4]float32
			withAsm(true, func() { quantDot4(ty, w, a, nb, &o1) })
			withAsm(false, func() { quantDot4(ty, w, a, nb, &o2) })
			for i := 0; i < 4; i++ {
				ai := testAct{q: a.q[i*K:], d: a.d[i*K/qk8:], p: a.p[i*q4Pairs(K):]}
				if a.kb != nil {
					ai.kb = a.kb[i*K/qkK:]
				}
				var g1, g2 float32
				withAsm(true, func() { g1 = quantDot1(ty, w, ai, nb) })
				withAsm(false, func() { g2 = quantDot1(ty, w, ai, nb) })
				scale := absDot(xf[i*K:(i+1)*K], wf)
				if !closeTo(g1, g2, scale, 2e-6) || !closeTo(o1[i], g2, scale, 2e-6) || !closeTo(o2[i], g2, scale, 2e-6) {
					t.Fatalf("%v nb=%d row %d: asm %g, asm x4 %g, go %g, go x4 %g", ty, nb, i, g1, o1[i], g2, o2[i])
				}
				// The twin itself is the dot product of the dequantized data.
				var ref float64
				for k := 0; k < K; k++ {
					ref += float64(xf[i*K+k]) * float64(wf[k])
				}
				if !closeTo(g2, float32(ref), scale, 1e-5) {
					t.Fatalf("%v nb=%d row %d: go %g, dequantized reference %g", ty, nb, i, g2, ref)
				}
			}
		}
	}
}

// With unit scales every float in the kernels is an exact integer, so the
// assembly must reproduce the integer dot products of the twins exactly.
func TestQuantKernelsExactIntegers(t *testing.T) {
	needAsm(t)
	r := rand.New(rand.NewPCG(3, 3))
	const one = 0x3c00 // 1.0 in f16
	for _, ty := range quantTypes {
		nb := 4
		K := nb * ty.BlockSize()
		w := make([]byte, nb*ty.BlockBytes())
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		for b := 0; b < nb; b++ {
			blk := w[b*ty.BlockBytes():]
			switch ty {
			case gpu.Q8_0, gpu.Q4_0, gpu.Q5_0:
				binary.LittleEndian.PutUint16(blk, one)
			case gpu.Q4_K, gpu.Q5_K, gpu.Q4_1, gpu.Q5_1:
				binary.LittleEndian.PutUint16(blk, one)
				binary.LittleEndian.PutUint16(blk[2:], one)
			case gpu.Q6_K:
				binary.LittleEndian.PutUint16(blk[208:], one)
				for i := 192; i < 208; i++ {
					blk[i] = byte(int8(r.IntN(33) - 16))
				}
			case gpu.Q3_K:
				binary.LittleEndian.PutUint16(blk[108:], one)
			case gpu.Q2_K:
				binary.LittleEndian.PutUint16(blk[80:], one)
				binary.LittleEndian.PutUint16(blk[82:], one)
			}
		}
		// Activations: small integers with unit scales.
		lim := 127
		if actKind(ty) == actQ8K {
			lim = 8
		}
		a := testAct{q: make([]int8, 4*K), d: make([]float32, 4*K/qk8)}
		for i := range a.q {
			a.q[i] = int8(r.IntN(2*lim+1) - lim)
		}
		for i := range a.d {
			a.d[i] = 1
		}
		if ty == gpu.Q4_0 {
			np := q4Pairs(K)
			a.p = make([]pairQ4, 4*np)
			for b := 0; b < 4*nb; b++ {
				p, h := &a.p[b/nb*np+b%nb/2], b%nb%2
				var s int32
				for j := 0; j < 16; j++ {
					p.lo[16*h+j] = a.q[b*qk8+j]
					p.hi[16*h+j] = a.q[b*qk8+16+j]
					s += int32(a.q[b*qk8+j]) + int32(a.q[b*qk8+16+j])
				}
				for j := 0; j < 4; j++ {
					p.d[4*h+j] = 1
				}
				p.corr[4*h] = -8 * s
			}
		}
		if actKind(ty) == actQ8K {
			a.kb = make([]blockQ8K, 4*K/qkK)
			for b := range a.kb {
				a.kb[b].d = 1
				for j := 0; j < 16; j++ {
					var s int16
					for l := 16 * j; l < 16*j+16; l++ {
						a.kb[b].qs[l] = a.q[b*qkK+l]
						s += int16(a.q[b*qkK+l])
					}
					a.kb[b].bsums[j] = s
				}
			}
		}
		var o1, o2 [4]float32
		withAsm(true, func() { quantDot4(ty, w, a, nb, &o1) })
		withAsm(false, func() { quantDot4(ty, w, a, nb, &o2) })
		if o1 != o2 {
			t.Errorf("%v x4: asm %v, go %v", ty, o1, o2)
		}
		var g1, g2 float32
		withAsm(true, func() { g1 = quantDot1(ty, w, a, nb) })
		withAsm(false, func() { g2 = quantDot1(ty, w, a, nb) })
		if g1 != g2 || g1 != o1[0] {
			t.Errorf("%v: asm %v, go %v, x4 %v", ty, g1, g2, o1[0])
		}
		if g2 == 0 || g2 != float32(int32(g2)) {
			t.Errorf("%v: result %v is not a nonzero integer", ty, g2)
		}
	}
}

func TestQuantizeActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	x := randFloats(r, 512)
	x[5] = 0
	for i := 256; i < 256+16; i++ {
		x[i] = 0
	}
	a := makeAct(x, 512)
	for i, v := range x {
		d := a.d[i/qk8]
		if math.Abs(float64(float32(a.q[i])*d-v)) > float64(d)/2*1.0001 {
			t.Fatalf("q8_0 element %d: %d·%g vs %g", i, a.q[i], d, v)
		}
		b := a.kb[i/qkK]
		if math.Abs(float64(float32(b.qs[i%qkK])*b.d-v)) > float64(b.d)/2*1.0001 {
			t.Fatalf("q8_K element %d: %d·%g vs %g", i, b.qs[i%qkK], b.d, v)
		}
	}
	for _, b := range a.kb {
		for j := 0; j < 16; j++ {
			var s int16
			for l := 16 * j; l < 16*j+16; l++ {
				s += int16(b.qs[l])
			}
			if s != b.bsums[j] {
				t.Fatalf("bsums[%d] = %d, want %d", j, b.bsums[j], s)
			}
		}
	}
	z := make([]float32, 256)
	var zb [1]blockQ8K
	zb[0].qs[3] = 9
	quantizeQ8K(z, zb[:])
	if zb[0] != (blockQ8K{}) {
		t.Error("all-zero block not zeroed")
	}
}

// The Go twins are the dot products of the dequantized weights and
// activations (this runs without assembly too).
func TestQuantTwinsMatchDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, ty := range quantTypes {
		for _, nb := range []int{1, 3, 8} {
			K := nb * ty.BlockSize()
			w := mustQuantize(t, ty, randFloats(r, K))
			x := randFloats(r, K)
			a := makeAct(x, K)
			wf, xf := dequant(t, ty, w, K), a.deq(ty)
			var g float32
			withAsm(false, func() { g = quantDot1(ty, w, a, nb) })
			var ref float64
			for k := 0; k < K; k++ {
				ref += float64(xf[k]) * float64(wf[k])
			}
			if !closeTo(g, float32(ref), absDot(xf, wf), 1e-5) {
				t.Errorf("%v nb=%d: go %g, dequantized reference %g", ty, nb, g, ref)
			}
		}
	}
}

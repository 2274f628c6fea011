package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu/quant"
)

// tileArena returns KVRows over a random arena of blocks blocks, each
// holding a K or V region at off, in F32 or (f16) F16.
func tileArena(r *rand.Rand, f16 bool, blocks, blockElems, off, stride int) *KVRows {
	kv := &KVRows{BlockElems: blockElems, Off: off, BT: TileBT, Stride: stride}
	n := blocks * blockElems
	if f16 {
		kv.F16 = make([]uint16, n)
		for i := range kv.F16 {
			kv.F16[i] = quant.Float32ToFP16(float32(r.NormFloat64()))
		}
	} else {
		kv.F32 = make([]float32, n)
		for i := range kv.F32 {
			kv.F32[i] = float32(r.NormFloat64())
		}
	}
	for _, b := range r.Perm(blocks)[:blocks-1] { // one block never read
		kv.Tab = append(kv.Tab, int32(b))
	}
	return kv
}

func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestAttnTileKernels checks the tile kernels against their Go twins, and
// that a score or an output has the same bits whichever heads and blocks
// share its call.
func TestAttnTileKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, f16 := range []bool{false, true} {
		for _, hd := range []int{64, 128, 48, 8, 16, 12} {
			const blocks, off = 9, 7
			kvDim := 2 * hd
			be := off + TileBT*kvDim + 3
			kv := tileArena(r, f16, blocks, be, off, kvDim)
			for _, nq := range []int{1, 3, 4, 9} {
				q := randF32(r, nq*hd)
				nb := len(kv.Tab)
				ostride := nb*TileBT + 5
				fast := make([]float32, nq*ostride)
				AttnQK(q, nq, hd, kv, nb, 0.125, fast, ostride)
				// The AVX2 twins: the same bits.
				avx2 := make([]float32, nq*ostride)
				withWide(false, func() { AttnQK(q, nq, hd, kv, nb, 0.125, avx2, ostride) })
				sameBits(t, "scores with the AVX2 kernels", avx2, fast)
				slow := make([]float32, nq*ostride)
				attnQKGo(q, nq, hd, kv, nb, 0.125, slow, ostride)
				for i := range fast {
					if d := math.Abs(float64(fast[i] - slow[i])); d > 1e-5*math.Sqrt(float64(hd)) {
						t.Fatalf("f16 %v hd %d nq %d: score %d: %g, Go twin %g", f16, hd, nq, i, fast[i], slow[i])
					}
				}
				// One head and one block at a time: the same bits.
				for h := 0; h < nq; h++ {
					for b := 0; b < nb; b++ {
						one := make([]float32, TileBT)
						sub := *kv
						sub.Tab = kv.Tab[b : b+1]
						AttnQK(q[h*hd:(h+1)*hd], 1, hd, &sub, 1, 0.125, one, TileBT)
						for j, x := range one {
							if y := fast[h*ostride+b*TileBT+j]; math.Float32bits(x) != math.Float32bits(y) {
								t.Fatalf("f16 %v hd %d nq %d: head %d block %d key %d alone %g, with others %g", f16, hd, nq, h, b, j, x, y)
							}
						}
					}
				}
				for _, cnt := range []int{1, 16, 37, nb * TileBT} {
					pstride := nb*TileBT + 3
					p := randF32(r, nq*pstride)
					init := randF32(r, nq*hd)
					fast := append([]float32(nil), init...)
					AttnPV(p, pstride, nq, hd, kv, cnt, fast, hd)
					avx2 := append([]float32(nil), init...)
					withWide(false, func() { AttnPV(p, pstride, nq, hd, kv, cnt, avx2, hd) })
					sameBits(t, "outputs with the AVX2 kernels", avx2, fast)
					slow := append([]float32(nil), init...)
					attnPVGo(p, pstride, nq, hd, kv, cnt, slow, hd)
					for i := range fast {
						if d := math.Abs(float64(fast[i] - slow[i])); d > 1e-4*math.Sqrt(float64(cnt)) {
							t.Fatalf("f16 %v hd %d nq %d cnt %d: output %d: %g, Go twin %g", f16, hd, nq, cnt, i, fast[i], slow[i])
						}
					}
					for h := 0; h < nq; h++ {
						one := append([]float32(nil), init[h*hd:(h+1)*hd]...)
						AttnPV(p[h*pstride:], pstride, 1, hd, kv, cnt, one, hd)
						for c, x := range one {
							if y := fast[h*hd+c]; math.Float32bits(x) != math.Float32bits(y) {
								t.Fatalf("f16 %v hd %d nq %d cnt %d: head %d col %d alone %g, with others %g", f16, hd, nq, cnt, h, c, x, y)
							}
						}
					}
				}
			}
		}
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %g, want %g", what, i, got[i], want[i])
		}
	}
}

// TestToHalf checks the F16C conversion against quant.Float32ToFP16 on
// random values, both rounding ties, subnormals, overflow, infinities and
// NaN.
func TestToHalf(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65520, 1e6, -1e6, 6e-8, 3e-8, 1e-10,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1 + 1.0/2048, 1 + 3.0/2048, 5.96e-8, 6.1e-5}
	for range 100_000 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	got := make([]uint16, len(src))
	ToHalf(got, src)
	for i, x := range src {
		if want := quant.Float32ToFP16(x); got[i] != want {
			t.Fatalf("%g (%#x): %#x, want %#x", x, math.Float32bits(x), got[i], want)
		}
	}
}

// TestAttnTileKernelsQ8 checks the Q8_0 tile kernels against the Go path
// (which dequantizes each value the same way), and that a score or an
// output has the same bits whichever heads and blocks share its call.
func TestAttnTileKernelsQ8(t *testing.T) {
	if !useAsm || !wideOn() {
		t.Skip("the Q8_0 tile kernels need AVX-512")
	}
	r := rand.New(rand.NewPCG(43, 44))
	for _, hd := range []int{64, 128, 32, 96} {
		const blocks, off = 9, 6
		kvDim := 2 * hd
		soff := TileBT * kvDim // the scales after every head's values
		be := off + soff + kvDim/32*TileBT*2 + 4
		kv := &KVRows{Q8: make([]byte, blocks*be), BlockElems: be, Off: off, BT: TileBT, SOff: soff}
		for i := 0; i+1 < len(kv.Q8); i += 2 { // every aligned pair a plausible float16
			h := quant.Float32ToFP16(float32(r.NormFloat64() * 0.01))
			kv.Q8[i], kv.Q8[i+1] = byte(h), byte(h>>8)
		}
		for _, b := range r.Perm(blocks)[:blocks-1] {
			kv.Tab = append(kv.Tab, int32(b))
		}
		v := *kv
		v.Stride, v.SStride = hd, hd/32*2
		for _, nq := range []int{1, 3, 4, 9} {
			q := randF32(r, nq*hd)
			nb := len(kv.Tab)
			ostride := nb*TileBT + 5
			fast := make([]float32, nq*ostride)
			AttnQK(q, nq, hd, kv, nb, 0.125, fast, ostride)
			slow := make([]float32, nq*ostride)
			attnQKGo(q, nq, hd, kv, nb, 0.125, slow, ostride)
			for i := range fast {
				if d := math.Abs(float64(fast[i] - slow[i])); d > 1e-4*(1+math.Abs(float64(slow[i]))) {
					t.Fatalf("hd %d nq %d: score %d: %g, Go %g", hd, nq, i, fast[i], slow[i])
				}
			}
			for h := 0; h < nq; h++ {
				for b := 0; b < nb; b++ {
					one := make([]float32, TileBT)
					sub := *kv
					sub.Tab = kv.Tab[b : b+1]
					AttnQK(q[h*hd:(h+1)*hd], 1, hd, &sub, 1, 0.125, one, TileBT)
					sameBits(t, "a score alone", fast[h*ostride+b*TileBT:], one)
				}
			}
			for _, cnt := range []int{1, 16, 37, nb * TileBT} {
				pstride := nb*TileBT + 3
				p := randF32(r, nq*pstride)
				init := randF32(r, nq*hd)
				fast := append([]float32(nil), init...)
				AttnPV(p, pstride, nq, hd, &v, cnt, fast, hd)
				slow := append([]float32(nil), init...)
				attnPVGo(p, pstride, nq, hd, &v, cnt, slow, hd)
				for i := range fast {
					if d := math.Abs(float64(fast[i] - slow[i])); d > 1e-4*(1+math.Abs(float64(slow[i]))) {
						t.Fatalf("hd %d nq %d cnt %d: output %d: %g, Go %g", hd, nq, cnt, i, fast[i], slow[i])
					}
				}
				for h := 0; h < nq; h++ {
					one := append([]float32(nil), init[h*hd:(h+1)*hd]...)
					AttnPV(p[h*pstride:], pstride, 1, hd, &v, cnt, one, hd)
					sameBits(t, "an output alone", fast[h*hd:], one)
				}
			}
		}
	}
}

// TestAttnPairs: two kv heads in one call give each score and output the
// bits of one head a call.
func TestAttnPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, f16 := range []bool{false, true} {
		for _, hd := range []int{64, 128, 48} {
			const blocks = 9
			kvDim := 2 * hd
			be := TileBT*kvDim + 3
			k0 := tileArena(r, f16, blocks, be, 0, kvDim)
			k1 := *k0
			k1.Off = hd * TileBT
			v0 := *k0
			v0.Stride = hd
			v1 := v0
			v1.Off = hd * TileBT
			pairCheck(t, r, hd, k0, &k1, &v0, &v1)
		}
	}
	// Q8_0: the values and the scales of each head at their own places.
	for _, hd := range []int{64, 128} {
		const blocks = 9
		kvDim := 2 * hd
		n := TileBT * kvDim
		be := 2 * (n + n/16)
		k0 := &KVRows{Q8: make([]byte, blocks*be), BlockElems: be, BT: TileBT, SOff: n}
		for i := 0; i+1 < len(k0.Q8); i += 2 {
			h := quant.Float32ToFP16(float32(r.NormFloat64() * 0.01))
			k0.Q8[i], k0.Q8[i+1] = byte(h), byte(h>>8)
		}
		for _, b := range r.Perm(blocks)[:blocks-1] {
			k0.Tab = append(k0.Tab, int32(b))
		}
		k1 := *k0
		k1.Off, k1.SOff = hd*TileBT, n-hd*TileBT+hd/32*TileBT*2
		v0 := *k0
		v0.Off, v0.SOff, v0.Stride, v0.SStride = n+n/16, n, hd, hd/32*2
		v1 := v0
		v1.Off, v1.SOff = v0.Off+hd*TileBT, n-hd*TileBT+hd/32*TileBT*2
		pairCheck(t, r, hd, k0, &k1, &v0, &v1)
	}
}

// pairCheck compares AttnQKPair and AttnPVPair on heads (k0, v0) and (k1,
// v1) with one head a call, bit for bit.
func pairCheck(t *testing.T, r *rand.Rand, hd int, k0, k1, v0, v1 *KVRows) {
	t.Helper()
	nb := len(k0.Tab)
	q := randF32(r, 2*hd)
	ostride := nb*TileBT + 5
	pair := make([]float32, 2*ostride)
	AttnQKPair(q, hd, k0, k1, nb, 0.125, pair, ostride)
	for h, k := range []*KVRows{k0, k1} {
		one := make([]float32, ostride)
		AttnQK(q[h*hd:(h+1)*hd], 1, hd, k, nb, 0.125, one, ostride)
		sameBits(t, "a paired score", pair[h*ostride:h*ostride+nb*TileBT], one[:nb*TileBT])
	}
	for _, cnt := range []int{1, 16, 37, nb * TileBT} {
		pstride := nb*TileBT + 3
		p := randF32(r, 2*pstride)
		init := randF32(r, 2*hd)
		out := append([]float32(nil), init...)
		AttnPVPair(p, pstride, hd, v0, v1, cnt, out, hd)
		for h, v := range []*KVRows{v0, v1} {
			one := append([]float32(nil), init[h*hd:(h+1)*hd]...)
			AttnPV(p[h*pstride:], pstride, 1, hd, v, cnt, one, hd)
			sameBits(t, "a paired output", out[h*hd:(h+1)*hd], one)
		}
	}
}

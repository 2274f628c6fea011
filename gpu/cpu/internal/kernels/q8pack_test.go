package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// packFamilies are the packed kernel families this machine runs, by name.
func packFamilies() map[string]*packKernels {
	f := map[string]*packKernels{"go": &packGo}
	if useAsm {
		f["avx2"] = &packAVX2
	}
	if useAsm && hasVNNI {
		f["vnni"] = &packVNNI
	}
	return f
}

// packWeights returns w's packed copy.
func packWeights(w *Weights) []byte {
	switch w.Type {
	case gpu.Q4_0:
		return PackQ4_0(w)
	case gpu.Q4_K:
		return PackQ4_K(w)
	case gpu.Q6_K:
		return PackQ6_K(w)
	}
	return PackQ8_0(w)
}

// TestMatMulPacked checks the packed Q8_0, Q4_0, Q4_K and Q6_K paths
// against the reference product; that every kernel family (Go twins,
// AVX2, VNNI where the CPU has it) gives the same bits; and that a row's
// result has the same bits alone, in any batch, on one thread or two:
// every row goes through the same kernel operations.
func TestMatMulPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, shape := range [][3]int{
			{16, 64, 8}, {37, 96, 8}, {200, 768, 8}, {770, 256, 8}, {16, 64, 2}, {37, 96, 2}, {200, 768, 2},
			{16, 256, 12}, {37, 512, 12}, {200, 768, 12}, {16, 256, 14}, {37, 512, 14}, {200, 768, 14}, {770, 256, 14},
		} {
			N, K, ty := shape[0], shape[1], gpu.DType(shape[2])
			w := &Weights{Type: ty, Rows: N, Cols: K, Data: mustQuantize(t, ty, randFloats(r, N*K))}
			withAsm(true, func() { w.Pack = packWeights(w) }) // packed without the assembly too, for the Go twins
			if w.Pack == nil {
				t.Fatal("not packed")
			}
			const M = 23
			x := randFloats(r, M*K)
			dst := make([]float32, M*N)
			NewMatMul(p).Run(dst, x, M, w)
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
			for name, k := range packFamilies() {
				mm := NewMatMul(p)
				mm.packWith = k
				all := make([]float32, M*N)
				mm.Run(all, x, M, w)
				for i := range all {
					if math.Float32bits(all[i]) != math.Float32bits(dst[i]) {
						t.Fatalf("%v %d×%d, %s kernels: out[%d] = %g, the default kernels' %g", ty, N, K, name, i, all[i], dst[i])
					}
				}
				for _, m := range []int{0, 5, 22} {
					for _, sub := range []int{1, 2, 4, 7} {
						lo := max(0, min(m, M-sub))
						one := make([]float32, sub*N)
						mm.Run(one, x[lo*K:(lo+sub)*K], sub, w)
						for i, v := range one {
							if math.Float32bits(v) != math.Float32bits(dst[lo*N+i]) {
								t.Fatalf("%v %d×%d, %s kernels, %d threads: row %d in a batch of %d: %g, in %d: %g",
									ty, N, K, name, threads, lo+i/N, sub, v, M, dst[lo*N+i])
							}
						}
					}
				}
			}
		}
		p.Close()
	}
}

// TestPackedKernelsMatchGo compares every packed kernel of every family
// the CPU runs, at every row count, with its Go twin bit for bit, on random
// packed bytes (every weight value, extreme ones included) and scales of
// many magnitudes, so that the float steps round alike too.
func TestPackedKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	scale := func() float32 {
		return float32((r.Float64()*2 - 1) * math.Ldexp(1, r.IntN(24)-12))
	}
	putScales := func(p []byte, block, off, n int) {
		for b := 0; b < len(p)/block; b++ {
			for j := 0; j < n; j++ {
				binary.LittleEndian.PutUint32(p[b*block+off+4*j:], math.Float32bits(scale()))
			}
		}
	}
	const nb = 3
	for name, k := range packFamilies() {
		if k == &packGo {
			continue
		}
		for _, ty := range []gpu.DType{gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K} {
			for rows := 1; rows <= q8MaxRows; rows++ {
				for trial := 0; trial < 4; trial++ {
					pb := packBlock(ty)
					w := make([]byte, nb*pb)
					for i := range w {
						w[i] = byte(r.Uint32())
					}
					var got, want [q8MaxRows * q8Group]float32
					switch ty {
					case gpu.Q8_0, gpu.Q4_0:
						putScales(w, pb, pb-4*q8Group, q8Group)
						x := make([]int8, rows*nb*qk8)
						for i := range x {
							x[i] = int8(r.IntN(255) - 127)
						}
						meta := make([]q8Meta, rows*nb)
						for i := range meta {
							meta[i] = q8Meta{d: scale(), c: int32(r.IntN(1<<16) - 1<<15)}
						}
						kern, twin := k.q8[rows-1], packGo.q8[rows-1]
						if ty == gpu.Q4_0 {
							kern, twin = k.q4[rows-1], packGo.q4[rows-1]
						}
						kern(&w[0], nb, &x[0], nb*qk8, &meta[0], 8*nb, &got[0])
						twin(&w[0], nb, &x[0], nb*qk8, &meta[0], 8*nb, &want[0])
					default:
						if ty == gpu.Q4_K {
							putScales(w, pb, 2432, 2*q8Group)
						} else {
							putScales(w, pb, 3328, q8Group)
						}
						x := make([]blockQ8K, rows*nb)
						for i := range x {
							for j := range x[i].qs {
								x[i].qs[j] = int8(r.IntN(255) - 127)
							}
							for j := range x[i].bsums {
								x[i].bsums[j] = int16(r.IntN(4065) - 2032)
							}
							x[i].d = scale()
						}
						kern, twin := k.q4k[rows-1], packGo.q4k[rows-1]
						if ty == gpu.Q6_K {
							kern, twin = k.q6k[rows-1], packGo.q6k[rows-1]
						}
						kern(&w[0], nb, &x[0], nb*q8KBytes, &got[0])
						twin(&w[0], nb, &x[0], nb*q8KBytes, &want[0])
					}
					for i := 0; i < rows*q8Group; i++ {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %v, %d rows: out[%d] = %g, the Go twin's %g", name, ty, rows, i, got[i], want[i])
						}
					}
				}
			}
		}
		// The two-group kernels against the one-group twin on each
		// group, the second group at a gap from the first.
		for _, ty := range []gpu.DType{gpu.Q8_0, gpu.Q4_0} {
			pair, twin := k.q8x2, packGo.q8[q8MaxRows-1]
			if ty == gpu.Q4_0 {
				pair, twin = k.q4x2, packGo.q4[q8MaxRows-1]
			}
			if pair == nil {
				continue
			}
			for trial := 0; trial < 4; trial++ {
				pb := packBlock(ty)
				gap := (1 + trial) * pb
				w := make([]byte, 2*nb*pb+gap)
				for i := range w {
					w[i] = byte(r.Uint32())
				}
				putScales(w[:nb*pb], pb, pb-4*q8Group, q8Group)
				putScales(w[nb*pb+gap:], pb, pb-4*q8Group, q8Group)
				x := make([]int8, q8MaxRows*nb*qk8)
				for i := range x {
					x[i] = int8(r.IntN(255) - 127)
				}
				meta := make([]q8Meta, q8MaxRows*nb)
				for i := range meta {
					meta[i] = q8Meta{d: scale(), c: int32(r.IntN(1<<16) - 1<<15)}
				}
				var got, want [2 * q8MaxRows * q8Group]float32
				pair(&w[0], nb*pb+gap, nb, &x[0], nb*qk8, &meta[0], 8*nb, &got[0])
				twin(&w[0], nb, &x[0], nb*qk8, &meta[0], 8*nb, &want[0])
				twin(&w[nb*pb+gap], nb, &x[0], nb*qk8, &meta[0], 8*nb, &want[q8MaxRows*q8Group])
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %v, two groups: out[%d] = %g, the Go twin's %g", name, ty, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestFMA32 checks the Go twins' fused multiply-add against exact
// arithmetic, over random operands of many magnitudes and at a case that
// rounding x·y + z first to float64 gets wrong.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	f := func() float32 { return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(60)-30)) }
	exact := func(x, y, z float32) float32 {
		v := new(big.Float).SetPrec(300).SetFloat64(float64(x))
		v.Mul(v, new(big.Float).SetFloat64(float64(y)))
		v.Add(v, new(big.Float).SetFloat64(float64(z)))
		g, _ := v.Float32()
		return g
	}
	for range 200000 {
		x, y, z := f(), f(), f()
		if got, want := fma32(x, y, z), exact(x, y, z); got != want {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", x, y, z, got, want)
		}
	}
	// x·y + z = 1 + 2⁻²⁴ + 2⁻⁶⁰: just above a float32 tie, but 1 + 2⁻²⁴,
	// the tie, in float64.
	x, y := float32(1+math.Ldexp(1, -23)), float32(1-math.Ldexp(1, -24))
	z := float32(math.Ldexp(1, -47) + math.Ldexp(1, -60))
	if got, want := fma32(x, y, z), exact(x, y, z); got != want || want != float32(1+math.Ldexp(1, -23)) {
		t.Fatalf("fma32 near a tie: %g, want %g", got, want)
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

// TestGeneratedUpToDate checks that q8gen's files are what it writes now.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("short: builds the generator")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	dir := t.TempDir()
	if out, err := exec.Command(goTool, "run", "./q8gen", dir).CombinedOutput(); err != nil {
		t.Fatalf("q8gen: %v\n%s", err, out)
	}
	for _, name := range []string{"q8pack_amd64.s", "qkpack_amd64.s", "packavx2_amd64.s", "pack_amd64.go", "f32pack_amd64.s", "f32pack_amd64.go"} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not q8gen's output (%v): run go generate", name, err)
		}
	}
}

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// withWide runs f with the wide kernels on or off.
func withWide(on bool, f func()) {
	old := wideOff.Load()
	wideOff.Store(!on)
	defer wideOff.Store(old)
	f()
}

// rawQ8_0 is n Q8_0 blocks of arbitrary quants (the whole int8 range, −128
// included, which no quantizer writes but a file may hold) and scales.
func rawQ8_0(r *rand.Rand, n int) []byte {
	b := make([]byte, n*bytesQ8_0)
	for i := 0; i < n; i++ {
		blk := b[i*bytesQ8_0:]
		binary.LittleEndian.PutUint16(blk, quant.Float32ToFP16(float32(r.ExpFloat64()*0.01+1e-4)))
		for j := 2; j < bytesQ8_0; j++ {
			blk[j] = byte(r.Uint32())
		}
	}
	return b
}

// The wide kernels give every product the bits of the AVX2 kernels: a Run
// with them matches a Run without them bit for bit, for every shape, batch
// size (rows past the last group of four, weight rows past the last wide
// tile) and thread count. The test says which paths it compared.
func TestWideKernelsMatchAVX2(t *testing.T) {
	if !useAsm || !hasWide {
		t.Skipf("no AVX-512 on this CPU (paths: %s)", Paths())
	}
	t.Logf("paths: %s (VNNI: %v)", Paths(), hasVNNI)
	r := rand.New(rand.NewPCG(19, 19))
	pools := []*Pool{NewPool(1), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	types := []gpu.DType{gpu.F32, gpu.F16, gpu.BF16, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K}
	ran := 0
	for _, ty := range types {
		for _, shape := range [][2]int{{8, 32}, {37, 96}, {70, 768}, {300, 64}, {37, 256}, {70, 1024}} {
			N, K := shape[0], shape[1]
			if wideRows(ty, K) == 0 || K%ty.BlockSize() != 0 {
				continue
			}
			ran++
			var data []byte
			if ty == gpu.Q8_0 {
				data = rawQ8_0(r, N*K/qk8)
			} else {
				data = mustQuantize(t, ty, randFloats(r, N*K))
			}
			w := &Weights{Type: ty, Rows: N, Cols: K, Data: data}
			for _, M := range []int{4, 7, 8, 23, 64} {
				x := randFloats(r, M*K)
				for i := 0; i < M*K; i += 97 {
					x[i] *= 1e4 // a wide dynamic range within a block
				}
				for _, p := range pools {
					name := fmt.Sprintf("%v/%dx%d/M=%d/threads=%d", ty, N, K, M, p.Threads())
					want := make([]float32, M*N)
					got := make([]float32, M*N)
					withWide(false, func() { NewMatMul(p).Run(want, x, M, w) })
					withWide(true, func() { NewMatMul(p).Run(got, x, M, w) })
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: out[%d] = %g with the wide kernels, %g without", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	if ran == 0 {
		t.Fatalf("no wide kernel ran (paths %s)", Paths())
	}
}

// AttnScores and AttnValues give the same bits with the AVX-512 kernels as
// with the AVX2 ones, for head sizes that take them (scores: multiples of
// 8, values: of 16), blocks of several sizes, row counts that leave every
// tail, and odd and even head counts.
func TestWideAttnMatchesAVX2(t *testing.T) {
	if !useAsm || !hasWide {
		t.Skipf("no AVX-512 on this CPU (paths: %s)", Paths())
	}
	r := rand.New(rand.NewPCG(20, 20))
	for _, hd := range []int{8, 16, 48, 64, 128} {
		for _, bt := range []int{1, 5, 16, 32} {
			for _, n := range []int{1, 3, 4, 7, 16, 17, 33, 100} {
				for _, nq := range []int{1, 2, 3, 8} {
					stride := 2 * hd
					nb := (n + bt - 1) / bt
					bf := 2*bt*stride + 8
					data := randFloats(r, (nb+2)*bf)
					tab := make([]int32, nb)
					for i, j := range r.Perm(nb + 2)[:nb] {
						tab[i] = int32(j)
					}
					pg := &Paged{Data: data, Tab: tab, BlockFloats: bf, Off: 3, BT: bt, Stride: stride}
					q := randFloats(r, nq*hd)
					sWant, sGot := make([]float32, nq*n), make([]float32, nq*n)
					withWide(false, func() { AttnScores(q, nq, hd, pg, n, 0.125, sWant) })
					withWide(true, func() { AttnScores(q, nq, hd, pg, n, 0.125, sGot) })
					for i := range sGot {
						if math.Float32bits(sGot[i]) != math.Float32bits(sWant[i]) {
							t.Fatalf("scores hd=%d bt=%d n=%d nq=%d: [%d] = %g with AVX-512, %g with AVX2", hd, bt, n, nq, i, sGot[i], sWant[i])
						}
					}
					p := randFloats(r, nq*n)
					base := randFloats(r, nq*hd)
					want := append([]float32(nil), base...)
					got := append([]float32(nil), base...)
					withWide(false, func() { AttnValues(p, nq, hd, pg, n, want) })
					withWide(true, func() { AttnValues(p, nq, hd, pg, n, got) })
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("hd=%d bt=%d n=%d nq=%d: out[%d] = %g with AVX-512, %g with AVX2", hd, bt, n, nq, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

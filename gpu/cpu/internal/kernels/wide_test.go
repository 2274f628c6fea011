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

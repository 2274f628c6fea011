package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
)

func TestPoolCoversRange(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		if p.Threads() != threads {
			t.Fatalf("Threads() = %d, want %d", p.Threads(), threads)
		}
		for _, n := range []int{0, 1, 2, 5, 31, 32, 33, 1000} {
			hits := make([]int32, n)
			var calls atomic.Int32
			p.For(n, func(lo, hi int) {
				calls.Add(1)
				if lo >= hi || lo < 0 || hi > n {
					t.Errorf("bad range [%d, %d) for n=%d", lo, hi, n)
				}
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads=%d n=%d: index %d visited %d times", threads, n, i, h)
				}
			}
			hits = make([]int32, n)
			p.ForEach(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("ForEach threads=%d n=%d: index %d visited %d times", threads, n, i, h)
				}
			}
		}
		p.Close()
		p.Close()
		ran := false
		p.For(3, func(lo, hi int) { ran = lo == 0 && hi == 3 })
		if !ran {
			t.Error("For after Close did not run inline")
		}
	}
	if p := NewPool(0); p.Threads() < 1 {
		t.Error("NewPool(0) has no threads")
	} else {
		p.Close()
	}
}

// Loops run on several goroutines at once, and the pool survives many
// back-to-back loops.
func TestPoolParallelAndReuse(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	var total atomic.Int64
	for it := 0; it < 500; it++ {
		p.For(64, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				total.Add(int64(i))
			}
		})
	}
	if got, want := total.Load(), int64(500*64*63/2); got != want {
		t.Fatalf("sum %d, want %d", got, want)
	}
}

// TestPoolParksAndWakes: loops far apart (the workers park between them),
// close together (they spin), and with a chunk slower than the spin (the
// caller parks for it) each cover their range once, and For returns only
// after every chunk has: what a chunk wrote is there when For returns.
func TestPoolParksAndWakes(t *testing.T) {
	for _, threads := range []int{2, 3} {
		p := NewPool(threads)
		for it := 0; it < 60; it++ {
			switch it % 3 {
			case 0:
				time.Sleep(3 * spinFor) // the workers park
			case 1:
				// back to back: the workers are still spinning
			}
			slow := it%3 == 2
			n := 4 * threads
			hits := make([]int32, n)
			p.For(n, func(lo, hi int) {
				if slow {
					// The workers' last chunks end after the caller's
					// spin: it parks for them.
					time.Sleep(3 * spinFor)
				}
				for i := lo; i < hi; i++ {
					hits[i]++ // plain writes: For's return must publish them
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads=%d loop %d: index %d visited %d times", threads, it, i, h)
				}
			}
		}
		p.Close()
	}
}

// TestPoolStress: more workers than CPUs, loops whose last chunks end
// about when the caller stops spinning, back to back: the caller parks in
// one loop while the last worker of the one before may still be on its
// way out, which must not wake it (a lost count here hangs For).
func TestPoolStress(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	var total atomic.Int64
	loops := 3000
	if testing.Short() {
		loops = 1000
	}
	for it := range loops {
		d := time.Duration(it%4) * spinFor / 2
		p.For(16, func(lo, hi int) {
			if lo%5 == 0 {
				time.Sleep(d)
			}
			total.Add(int64(hi - lo))
		})
	}
	if got := total.Load(); got != int64(16*loops) {
		t.Fatalf("%d indices visited, want %d", got, 16*loops)
	}
}

// TestPoolLateWakeUp: a worker may spin into a loop, finish it and park
// again before For's wakeParked reaches it, so the wake-up it then gets
// is for a loop it has done. Fresh pools (workers spinning, then parking)
// run their first small loops, over and over: after every For no chunk
// may still be running and the loop's count must be back at zero, and no
// For may hang. Taking the late wake-up for a new loop failed this in a
// few hundred pools under -race with the CPUs busy, and hung make test.
func TestPoolLateWakeUp(t *testing.T) {
	pools := 400
	if testing.Short() {
		pools = 150
	}
	for it := range pools {
		p := NewPool(3 + 5*(it%2))
		done := make(chan string, 1)
		go func() {
			var running atomic.Int32
			for _, n := range []int{2, 3, 5, 2, 9, 2} {
				p.For(n, func(lo, hi int) {
					running.Add(1)
					runtime.Gosched()
					running.Add(-1)
				})
				if r, pend := running.Load(), p.pending.Load(); r != 0 || pend != 0 {
					done <- fmt.Sprintf("pool %d, n=%d: For returned with %d chunks running and %d workers counted in", it, n, r, pend)
					return
				}
			}
			done <- ""
		}()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatal(msg)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("pool %d: For hung (pending %d, waiting %d)", it, p.pending.Load(), p.waiting.Load())
		}
		p.Close()
	}
}

// refMatMul is x·Wᵀ in float64 from the dequantized weights, plus a bound
// on each output's error: the activation quantization error (half a step
// of the block's scale per element) times |W|, plus float32 rounding.
func refMatMul(t testing.TB, w *Weights, x []float32, M int) (ref, tol []float64) {
	K, N := w.Cols, w.Rows
	wf := make([]float32, N*K)
	for r := 0; r < N; r++ {
		DequantizeRow(w, r, wf[r*K:(r+1)*K])
	}
	step := make([]float64, M*K) // half the activation quantization step
	if kind := actKind(w.Type); kind != actF32 {
		bs := qk8
		if kind == actQ8K {
			bs = qkK
		}
		for m := 0; m < M; m++ {
			for b := 0; b < K/bs; b++ {
				var amax float64
				for _, v := range x[m*K+b*bs : m*K+(b+1)*bs] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				for k := b * bs; k < (b+1)*bs; k++ {
					step[m*K+k] = amax / 127 / 2
				}
			}
		}
	}
	ref = make([]float64, M*N)
	tol = make([]float64, M*N)
	for m := 0; m < M; m++ {
		for r := 0; r < N; r++ {
			var s, abs, q float64
			for k := 0; k < K; k++ {
				wv, xv := float64(wf[r*K+k]), float64(x[m*K+k])
				s += wv * xv
				abs += math.Abs(wv * xv)
				q += math.Abs(wv) * step[m*K+k]
			}
			ref[m*N+r] = s
			tol[m*N+r] = q*1.001 + 2e-6*abs + 1e-6
		}
	}
	return ref, tol
}

func testShapes(ty gpu.DType) [][2]int {
	if ty.BlockSize() == qkK {
		return [][2]int{{37, 256}, {9, 768}}
	}
	if ty.BlockSize() == qk8 {
		return [][2]int{{37, 96}, {8, 512}}
	}
	return [][2]int{{37, 100}, {5, 256}, {3, 7}}
}

// MatMul matches the float64 reference for every type and several shapes,
// with the assembly and the Go kernels, serial and on several threads.
func TestMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	pools := []*Pool{NewPool(1), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, ty := range gpu.DTypes {
		for _, shape := range testShapes(ty) {
			N, K := shape[0], shape[1]
			w := &Weights{Type: ty, Rows: N, Cols: K, Data: mustQuantize(t, ty, randFloats(r, N*K))}
			for _, M := range []int{1, 3, 17, 64} {
				x := randFloats(r, M*K)
				ref, tol := refMatMul(t, w, x, M)
				for _, asm := range []bool{true, false} {
					if asm && !useAsm {
						continue
					}
					for _, p := range pools {
						name := fmt.Sprintf("%v/%dx%d/M=%d/asm=%v/threads=%d", ty, N, K, M, asm, p.Threads())
						dst := make([]float32, M*N+1)
						dst[M*N] = 42 // guard
						withAsm(asm, func() { NewMatMul(p).Run(dst, x, M, w) })
						if dst[M*N] != 42 {
							t.Fatalf("%s: wrote past the output", name)
						}
						for i := range ref {
							if math.Abs(float64(dst[i])-ref[i]) > tol[i] {
								t.Fatalf("%s: out[%d] = %g, want %g ± %g", name, i, dst[i], ref[i], tol[i])
							}
						}
					}
				}
			}
		}
	}
}

// Plans are cached per shape and reused across calls and batch sizes.
func TestMatMulPlanCacheAndReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	p := NewPool(2)
	defer p.Close()
	mm := NewMatMul(p)
	w := &Weights{Type: gpu.Q4_0, Rows: 64, Cols: 128, Data: mustQuantize(t, gpu.Q4_0, randFloats(r, 64*128))}
	for _, M := range []int{1, 5, 1, 40, 5} {
		x := randFloats(r, M*128)
		dst := make([]float32, M*64)
		mm.Run(dst, x, M, w)
		ref, tol := refMatMul(t, w, x, M)
		for i := range ref {
			if math.Abs(float64(dst[i])-ref[i]) > tol[i] {
				t.Fatalf("M=%d: out[%d] = %g, want %g", M, i, dst[i], ref[i])
			}
		}
	}
	if len(mm.plans) != 3 {
		t.Errorf("%d plans cached, want 3 (buckets 1, 15, 63)", len(mm.plans))
	}
}

// A large batch that needs several activation blocks per weight block.
func TestMatMulLargeBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	r := rand.New(rand.NewPCG(7, 7))
	p := NewPool(2)
	defer p.Close()
	for _, ty := range []gpu.DType{gpu.F32, gpu.Q8_0, gpu.Q6_K} {
		const N, K, M = 24, 2048, 70
		w := &Weights{Type: ty, Rows: N, Cols: K, Data: mustQuantize(t, ty, randFloats(r, N*K))}
		mm := NewMatMul(p)
		x := randFloats(r, M*K)
		dst := make([]float32, M*N)
		mm.Run(dst, x, M, w)
		if pl := mm.plans[planKey{ty, N, K, mBucket(M), w.Pack != nil}]; pl.xBlock >= M {
			t.Errorf("%v: plan %+v keeps all %d rows in one block", ty, pl, M)
		}
		ref, tol := refMatMul(t, w, x, M)
		for i := range ref {
			if math.Abs(float64(dst[i])-ref[i]) > tol[i] {
				t.Fatalf("%v: out[%d] = %g, want %g", ty, i, dst[i], ref[i])
			}
		}
	}
}

func TestMatMulPanicsOnBadSizes(t *testing.T) {
	p := NewPool(1)
	defer p.Close()
	w := &Weights{Type: gpu.F32, Rows: 2, Cols: 4, Data: make([]byte, 32)}
	defer func() {
		if recover() == nil {
			t.Error("short dst accepted")
		}
	}()
	NewMatMul(p).Run(make([]float32, 1), make([]float32, 4), 1, w)
}

func TestDequantizeRow(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	x := randFloats(r, 3*256)
	w := &Weights{Type: gpu.Q6_K, Rows: 3, Cols: 256, Data: mustQuantize(t, gpu.Q6_K, x)}
	all := dequant(t, gpu.Q6_K, w.Data, 3*256)
	row := make([]float32, 256)
	DequantizeRow(w, 2, row)
	for i := range row {
		if row[i] != all[512+i] {
			t.Fatalf("element %d: %g, want %g", i, row[i], all[512+i])
		}
	}
}

// A row's result does not depend on the batch around it: every row of a
// batched Run matches, bit for bit, a Run of that row alone, for every
// batch size, thread count and weight type.
func TestMatMulBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	pools := []*Pool{NewPool(1), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, ty := range gpu.DTypes {
		for _, shape := range append(testShapes(ty), [2]int{70, 768}) {
			N, K := shape[0], shape[1]
			w := &Weights{Type: ty, Rows: N, Cols: K, Data: mustQuantize(t, ty, randFloats(r, N*K))}
			x := randFloats(r, 23*K)
			for _, asm := range []bool{true, false} {
				if asm && !useAsm {
					continue
				}
				one := make([]float32, 23*N)
				withAsm(asm, func() {
					mm := NewMatMul(pools[0])
					for m := 0; m < 23; m++ {
						mm.Run(one[m*N:(m+1)*N], x[m*K:(m+1)*K], 1, w)
					}
				})
				for _, p := range pools {
					for _, M := range []int{2, 4, 5, 8, 23} {
						got := make([]float32, M*N)
						withAsm(asm, func() { NewMatMul(p).Run(got, x, M, w) })
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(one[i]) {
								t.Fatalf("%v %dx%d asm=%v threads=%d M=%d: out[%d] = %g, alone %g",
									ty, N, K, asm, p.Threads(), M, i, got[i], one[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestRunShared checks that RunShared gives Run's bits over a run of
// matrices of every activation kind on one input (packed Q8_0 and Q4_0
// share Q8_0 blocks but not their corrections; the K-quants share Q8_K),
// and that it does use the quantized copy again: after x changes, a call
// that says it has not returns the old x's product.
func TestRunShared(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const M, K = 13, 512
	var ws []*Weights
	for _, ty := range []gpu.DType{gpu.Q8_0, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K, gpu.Q4_K, gpu.Q8_0, gpu.Q5_0, gpu.F32, gpu.Q8_0} {
		w := &Weights{Type: ty, Rows: 40, Cols: K, Data: mustQuantize(t, ty, randFloats(r, 40*K))}
		if len(ws)%2 == 0 {
			w.Pack = packWeights(w)
		}
		ws = append(ws, w)
	}
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		x := randFloats(r, M*K)
		shared, alone := NewMatMul(p), NewMatMul(p)
		for i, w := range ws {
			got, want := make([]float32, M*w.Rows), make([]float32, M*w.Rows)
			shared.RunShared(got, x, M, w, i > 0)
			alone.Run(want, x, M, w)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%d threads, matrix %d (%v, packed %v): out[%d] = %g shared, %g alone", threads, i, w.Type, w.Pack != nil, j, got[j], want[j])
				}
			}
		}
		for _, w := range []*Weights{ws[0], ws[3]} {
			old := make([]float32, M*w.Rows)
			shared.Run(old, x, M, w)
			x2 := append([]float32(nil), x...)
			for i := range x2 {
				x2[i] *= 2
			}
			copy(x, x2)
			stale, fresh := make([]float32, M*w.Rows), make([]float32, M*w.Rows)
			shared.RunShared(stale, x, M, w, true)
			shared.RunShared(fresh, x, M, w, false)
			same := true
			for j := range old {
				if math.Float32bits(stale[j]) != math.Float32bits(old[j]) {
					t.Fatalf("%v: out[%d] = %g with the quantized copy kept, %g before x changed", w.Type, j, stale[j], old[j])
				}
				same = same && fresh[j] == old[j]
			}
			if same {
				t.Fatalf("%v: the product of a changed x is unchanged", w.Type)
			}
		}
		p.Close()
	}
}

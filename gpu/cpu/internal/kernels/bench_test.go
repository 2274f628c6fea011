package kernels

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// randomWeights fills a matrix with random bytes, then makes every scale
// field a finite, modest f16 so that results stay finite. Quantizing real
// data would take far longer than the benchmarks for the larger shapes, and
// kernel speed does not depend on the values.
func randomWeights(ty gpu.DType, rows, cols int) *Weights {
	r := rand.New(rand.NewPCG(uint64(ty), uint64(rows*cols)))
	rb, _ := ty.RowBytes(cols)
	data := make([]byte, rows*rb)
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	scale := func() uint16 { return quant.Float32ToFP16(float32(r.Float64()*0.01 + 0.001)) }
	put := func(off int) { binary.LittleEndian.PutUint16(data[off:], scale()) }
	switch ty {
	case gpu.F32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], uint32(r.NormFloat64()*1e6)&0x3fffffff|0x3c000000)
		}
	case gpu.F16:
		for i := 0; i < len(data); i += 2 {
			put(i)
		}
	case gpu.BF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], quant.Float32ToBF16(float32(r.NormFloat64())))
		}
	default:
		bb := ty.BlockBytes()
		for b := 0; b < len(data)/bb; b++ {
			switch ty {
			case gpu.Q8_0, gpu.Q4_0, gpu.Q5_0:
				put(b * bb)
			case gpu.Q4_K, gpu.Q5_K, gpu.Q4_1, gpu.Q5_1:
				put(b * bb)
				put(b*bb + 2)
			case gpu.Q6_K:
				put(b*bb + 208)
			case gpu.Q3_K:
				put(b*bb + 108)
			case gpu.Q2_K:
				put(b*bb + 80)
				put(b*bb + 82)
			}
		}
	}
	return &Weights{Type: ty, Rows: rows, Cols: cols, Data: data}
}

var benchWeights = map[string]*Weights{}

func cachedWeights(ty gpu.DType, rows, cols int) *Weights {
	k := fmt.Sprint(ty, rows, cols)
	if w, ok := benchWeights[k]; ok {
		return w
	}
	clear(benchWeights) // keep at most one large matrix alive
	w := randomWeights(ty, rows, cols)
	benchWeights[k] = w
	return w
}

// BenchmarkMatMul reports weight bytes per second (MB/s) for one Run; at
// M=1 that is the matrix-vector bandwidth, at larger M the aggregate
// throughput is M times the reported figure in multiply-adds. GMAC/s counts
// multiply-adds per second across all rows.
func BenchmarkMatMul(b *testing.B) {
	shapes := [][2]int{{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}}
	types := gpu.DTypes
	pool := NewPool(0)
	defer pool.Close()
	for _, ty := range types {
		for _, sh := range shapes {
			for _, M := range []int{1, 16, 512} {
				b.Run(fmt.Sprintf("%v/%dx%d/M=%d", ty, sh[0], sh[1], M), func(b *testing.B) {
					w := cachedWeights(ty, sh[0], sh[1])
					runMatMul(b, pool, w, M)
					secs := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(M)*float64(w.Rows)*float64(w.Cols)/secs/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkMemBandwidth sums a 256 MiB slice with the assembly kernel: the
// machine's streaming read bandwidth for one thread (or, with -cpu N, N
// threads), to compare with BenchmarkMatMul's weight bytes per second.
func BenchmarkMemBandwidth(b *testing.B) {
	x := make([]float32, 64<<20)
	for i := range x {
		x[i] = 1
	}
	pool := NewPool(0)
	defer pool.Close()
	sums := make([]float32, pool.Threads())
	b.SetBytes(int64(4 * len(x)))
	b.ResetTimer()
	for range b.N {
		n := pool.Threads()
		pool.For(n, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				sums[t] = sumF32(x[t*len(x)/n : (t+1)*len(x)/n])
			}
		})
	}
}

// BenchmarkDot measures the single-row kernels on L1/L2-resident data.
func BenchmarkDot(b *testing.B) {
	const K = 4096
	r := rand.New(rand.NewPCG(3, 4))
	x := randFloats(r, K)
	a := makeAct(x, K)
	for _, ty := range gpu.DTypes {
		w := randomWeights(ty, 1, K)
		b.Run(ty.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w.Data)))
			var s float32
			for range b.N {
				switch ty {
				case gpu.F32:
					s += dotF32(x, f32s(w.Data))
				case gpu.F16:
					s += dotF16(x, u16s(w.Data))
				case gpu.BF16:
					s += dotBF16(x, u16s(w.Data))
				default:
					s += quantDot1(ty, w.Data, a, K/ty.BlockSize())
				}
			}
			_ = s
		})
	}
}

// BenchmarkDot4 compares the four-row kernels (SetBytes counts the weight
// row once per activation row) with the single-row ones on cached data.
func BenchmarkDot4(b *testing.B) {
	for _, K := range []int{768, 4096} {
		r := rand.New(rand.NewPCG(3, 4))
		x := randFloats(r, 4*K)
		a := makeAct(x, K)
		for _, ty := range []gpu.DType{gpu.F32, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K, gpu.Q4_1, gpu.Q5_0, gpu.Q5_1, gpu.Q2_K, gpu.Q3_K, gpu.Q5_K} {
			w := randomWeights(ty, 1, K)
			b.Run(fmt.Sprintf("%v/K=%d", ty, K), func(b *testing.B) {
				b.SetBytes(int64(len(w.Data)) * 4)
				var out [4]float32
				for range b.N {
					switch ty {
					case gpu.F32:
						dotF32x4(x, K, f32s(w.Data), &out)
					default:
						quantDot4(ty, w.Data, a, K/ty.BlockSize(), &out)
					}
				}
			})
			b.Run(fmt.Sprintf("%v/K=%d/single", ty, K), func(b *testing.B) {
				b.SetBytes(int64(len(w.Data)))
				var s float32
				for range b.N {
					switch ty {
					case gpu.F32:
						s += dotF32(x[:K], f32s(w.Data))
					default:
						s += quantDot1(ty, w.Data, a, K/ty.BlockSize())
					}
				}
				_ = s
			})
		}
	}
}

// BenchmarkMatMulPaths runs the batched shapes of a prompt with the wide
// (AVX-512) kernels off and on, in one process, for the ratio between them.
func BenchmarkMatMulPaths(b *testing.B) {
	pool := NewPool(1)
	defer pool.Close()
	for _, ty := range []gpu.DType{gpu.F32, gpu.F16, gpu.BF16, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K} {
		for _, sh := range [][2]int{{2048, 768}, {768, 2048}} {
			for _, M := range []int{16, 512} {
				for _, wide := range []bool{false, true} {
					b.Run(fmt.Sprintf("%v/%dx%d/M=%d/wide=%v", ty, sh[0], sh[1], M, wide), func(b *testing.B) {
						w := cachedWeights(ty, sh[0], sh[1])
						r := rand.New(rand.NewPCG(1, 2))
						x := randFloats(r, M*w.Cols)
						dst := make([]float32, M*w.Rows)
						withWide(wide, func() {
							mm := NewMatMul(pool)
							mm.Run(dst, x, M, w)
							b.ResetTimer()
							for range b.N {
								mm.Run(dst, x, M, w)
							}
						})
						secs := b.Elapsed().Seconds() / float64(b.N)
						b.ReportMetric(float64(M)*float64(w.Rows)*float64(w.Cols)/secs/1e9, "GMAC/s")
					})
				}
			}
		}
	}
}

// BenchmarkMatMulStream is a decode step's shape: a batch of M rows through
// 48 different 2048×768 matrices (more than the caches hold), so the weights
// stream from memory, with the wide kernels off and on.
func BenchmarkMatMulStream(b *testing.B) {
	pool := NewPool(0)
	defer pool.Close()
	for _, ty := range []gpu.DType{gpu.F32, gpu.Q8_0, gpu.Q4_0} {
		ws := make([]*Weights, 48)
		r := rand.New(rand.NewPCG(3, 4))
		src := randFloats(r, 2048*768)
		for i := range ws {
			data, err := quant.Quantize(ty, src)
			if err != nil {
				b.Fatal(err)
			}
			data[i%len(data)] ^= 1
			ws[i] = &Weights{Type: ty, Rows: 2048, Cols: 768, Data: data}
		}
		for _, M := range []int{1, 16} {
			for _, wide := range []bool{false, true} {
				b.Run(fmt.Sprintf("%v/M=%d/wide=%v", ty, M, wide), func(b *testing.B) {
					x := randFloats(r, M*768)
					dst := make([]float32, M*2048)
					withWide(wide, func() {
						mm := NewMatMul(pool)
						b.ResetTimer()
						for range b.N {
							for _, w := range ws {
								mm.Run(dst, x, M, w)
							}
						}
					})
					secs := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(M)*48*2048*768/secs/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkMatMulFewRows runs the few rows of a decode step that verifies
// drafts (1 to 9 rows) on one thread, weights larger than the caches: a
// row more should cost its arithmetic, not another read of the weights.
func BenchmarkMatMulFewRows(b *testing.B) {
	pool := NewPool(1)
	defer pool.Close()
	for _, ty := range []gpu.DType{gpu.F32, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K} {
		w := cachedWeights(ty, 8192, 768)
		for _, M := range []int{1, 2, 3, 4, 5, 9} {
			b.Run(fmt.Sprintf("%v/M=%d", ty, M), func(b *testing.B) { runMatMul(b, pool, w, M) })
		}
	}
}

// runMatMul times M random activation rows times w on pool, b.N times
// after one run to warm up (SetBytes: the weights once a call).
func runMatMul(b *testing.B, pool *Pool, w *Weights, M int) {
	r := rand.New(rand.NewPCG(1, 2))
	x := randFloats(r, M*w.Cols)
	dst := make([]float32, M*w.Rows)
	mm := NewMatMul(pool)
	mm.Run(dst, x, M, w)
	b.SetBytes(int64(len(w.Data)))
	b.ResetTimer()
	for range b.N {
		mm.Run(dst, x, M, w)
	}
}

// BenchmarkMatMulPacked compares the packed kernels (VNNI where the CPU
// has it and the wide kernels are on, else AVX2) with the row-major ones on
// one thread, the same weights and activations.
func BenchmarkMatMulPacked(b *testing.B) {
	if !useAsm {
		b.Skip("no assembly: nothing is packed")
	}
	pool := NewPool(1)
	defer pool.Close()
	for _, ty := range []gpu.DType{gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K} {
		for _, sh := range [][2]int{{2048, 768}, {768, 2048}} {
			for _, M := range []int{1, 16, 512} {
				for _, packed := range []bool{false, true} {
					b.Run(fmt.Sprintf("%v/%dx%d/M=%d/packed=%v", ty, sh[0], sh[1], M, packed), func(b *testing.B) {
						w := *cachedWeights(ty, sh[0], sh[1])
						if packed {
							w.Pack = packWeights(&w)
						}
						r := rand.New(rand.NewPCG(1, 2))
						x := randFloats(r, M*w.Cols)
						dst := make([]float32, M*w.Rows)
						mm := NewMatMul(pool)
						mm.Run(dst, x, M, &w)
						b.ResetTimer()
						for range b.N {
							mm.Run(dst, x, M, &w)
						}
						secs := b.Elapsed().Seconds() / float64(b.N)
						b.ReportMetric(float64(M)*float64(w.Rows)*float64(w.Cols)/secs/1e9, "GMAC/s")
					})
				}
			}
		}
	}
}

// BenchmarkMatMulPackedF32 compares the packed F32 path (PackF32) with the
// row-major one on one thread, the same weights and activations, at a
// prompt's batch and at decode.
func BenchmarkMatMulPackedF32(b *testing.B) {
	if !useAsm {
		b.Skip("no assembly: nothing is packed")
	}
	pool := NewPool(1)
	defer pool.Close()
	for _, sh := range [][2]int{{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}} {
		for _, M := range []int{512, 1} {
			for _, packed := range []bool{false, true} {
				b.Run(fmt.Sprintf("%dx%d/M=%d/packed=%v", sh[0], sh[1], M, packed), func(b *testing.B) {
					w := *cachedWeights(gpu.F32, sh[0], sh[1])
					if packed {
						w.Pack = PackF32(&w)
					}
					r := rand.New(rand.NewPCG(1, 2))
					x := randFloats(r, M*w.Cols)
					dst := make([]float32, M*w.Rows)
					mm := NewMatMul(pool)
					mm.Run(dst, x, M, &w)
					b.ResetTimer()
					for range b.N {
						mm.Run(dst, x, M, &w)
					}
					secs := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(M)*float64(w.Rows)*float64(w.Cols)/secs/1e9, "GMAC/s")
				})
			}
		}
	}
}

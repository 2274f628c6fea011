package cpu

import (
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
)

// MemoryBandwidth measures the read bandwidth of main memory in bytes per
// second with the given number of threads: each thread sums its share of a
// 256 MiB buffer with the same vector kernel the F32 matrix multiply uses.
// The best of several passes is returned. It takes about a second.
func MemoryBandwidth(threads int) float64 {
	if threads <= 0 {
		threads = 1
	}
	const n = 64 << 20 // floats: 256 MiB
	buf := make([]float32, n)
	for i := range buf {
		buf[i] = float32(i & 7)
	}
	var sink float32
	best := 0.0
	for pass := 0; pass < 5; pass++ {
		var wg sync.WaitGroup
		sums := make([]float32, threads)
		t0 := time.Now()
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				sums[t] = kernels.Sum(buf[t*n/threads : (t+1)*n/threads])
			}(t)
		}
		wg.Wait()
		if bw := float64(n*4) / time.Since(t0).Seconds(); bw > best {
			best = bw
		}
		for _, s := range sums {
			sink += s
		}
	}
	_ = sink
	return best
}

// Peak is one thread's most F32 and 8-bit integer multiply-adds per
// second (kernels.Peak).
type Peak = kernels.Peak

// MeasurePeak measures the calling thread's Peak in about a third of a
// second: the best of several runs of FMA and VPDPBUSD loops.
func MeasurePeak() Peak { return kernels.MeasurePeak() }

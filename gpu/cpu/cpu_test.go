package cpu_test

import (
	"sync/atomic"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/gputest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, threads := range []int{1, 3} {
		gputest.Run(t, func(t *testing.T) gpu.Backend { return cpu.New(cpu.Config{Threads: threads}) })
	}
}

// TestReadLarge: a read of at least parallelCopy floats (copied on every
// thread) returns every element, at 1, 2 and 3 threads and at sizes that
// do not divide among them.
func TestReadLarge(t *testing.T) {
	t.Parallel()
	for _, threads := range []int{1, 2, 3} {
		be := cpu.New(cpu.Config{Threads: threads})
		for _, rows := range []int{1, 3, 7} {
			const cols = 32003
			x, err := be.NewTensor(rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]float32, rows*cols)
			for i := range src {
				src[i] = float32(i)
			}
			be.Write(x, src)
			got := make([]float32, rows*cols)
			if err := be.Read(x, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				if v != src[i] {
					t.Fatalf("%d threads, %d×%d: element %d is %v, want %v", threads, rows, cols, i, v, src[i])
				}
			}
		}
		be.Close()
	}
}

// TestHostFor: HostFor (gpu.HostParallel) calls its function on ranges
// that cover [0, n) once each, on the backend's threads and, after Close,
// on the caller's.
func TestHostFor(t *testing.T) {
	t.Parallel()
	for _, threads := range []int{1, 2, 4} {
		be := cpu.New(cpu.Config{Threads: threads})
		var hp gpu.HostParallel = be
		check := func(n int) {
			hits := make([]atomic.Int32, n)
			hp.HostFor(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("%d threads, n %d: index %d run %d times", threads, n, i, h)
				}
			}
		}
		for _, n := range []int{0, 1, 2, 16, 33} {
			check(n)
		}
		be.Close()
		check(16)
	}
}

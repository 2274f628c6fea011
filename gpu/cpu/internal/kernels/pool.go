package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool runs parallel loops on persistent worker goroutines. The goroutine
// that calls For takes part in the loop, so a pool of n threads keeps n−1
// workers.
//
// For may be called by one goroutine at a time; calls from several
// goroutines are serialized.
type Pool struct {
	threads int
	start   []chan struct{} // one per worker
	mu      sync.Mutex      // serializes For
	wg      sync.WaitGroup  // workers still in the current loop
	exited  sync.WaitGroup  // workers still running (for Close)
	closed  bool

	// The current loop, written by For before the workers are woken.
	fn    func(lo, hi int)
	n     int
	chunk int
	next  atomic.Int64
}

// NewPool starts a pool of the given number of threads; threads ≤ 0 means
// runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, start: make([]chan struct{}, threads-1)}
	p.exited.Add(threads - 1)
	for i := range p.start {
		ch := make(chan struct{}, 1)
		p.start[i] = ch
		go p.worker(ch)
	}
	return p
}

// Threads returns the number of threads that run loops, the caller's
// included.
func (p *Pool) Threads() int { return p.threads }

func (p *Pool) worker(ch chan struct{}) {
	defer p.exited.Done()
	for range ch {
		p.run()
		p.wg.Done()
	}
}

// run takes chunks of the current loop until none are left.
func (p *Pool) run() {
	fn, n, chunk := p.fn, p.n, p.chunk
	for {
		lo := int(p.next.Add(1)-1) * chunk
		if lo >= n {
			return
		}
		fn(lo, min(lo+chunk, n))
	}
}

// For calls fn on disjoint ranges [lo, hi) covering [0, n), in parallel on
// the pool's threads, and returns when every call has returned. Ranges are
// handed out dynamically in chunks of about n/(4·threads), in increasing
// order. n ≤ 0 does nothing. fn must not call For on the same pool. After
// Close, For runs fn(0, n) on the calling goroutine.
func (p *Pool) For(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.threads == 1 || n == 1 || p.closed {
		fn(0, n)
		return
	}
	chunks := min(n, 4*p.threads)
	chunk := (n + chunks - 1) / chunks
	chunks = (n + chunk - 1) / chunk
	p.fn, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	workers := min(p.threads-1, chunks-1)
	p.wg.Add(workers)
	for i := 0; i < workers; i++ {
		p.start[i] <- struct{}{}
	}
	p.run()
	p.wg.Wait()
	p.fn = nil
}

// ForEach is For with a static split: thread i of k = min(n, Threads())
// gets the i-th of k nearly equal contiguous ranges. It suits loops whose
// iterations cost the same and touch memory in order.
func (p *Pool) ForEach(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	k := min(n, p.threads)
	p.For(k, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i*n/k, (i+1)*n/k)
		}
	})
}

// Close stops the workers. The pool must not be in use.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, ch := range p.start {
		close(ch)
	}
	p.exited.Wait()
}

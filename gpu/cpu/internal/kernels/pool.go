package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs parallel loops on persistent worker goroutines. The goroutine
// that calls For takes part in the loop, so a pool of n threads keeps n−1
// workers.
//
// A worker that finishes a loop watches for the next one for a while
// (spinFor) before it parks: a forward pass runs its loops a few
// microseconds apart, and waking a parked goroutine costs far more than
// that where the machine is a VM (the runtime wakes an idle thread, which
// must then steal the goroutine; 85–130 µs measured on a 2-vCPU VM, where a
// decode step's matrix products take about 100 µs each). The caller
// likewise waits for the workers' last chunks by spinning, then parks.
//
// For may be called by one goroutine at a time; calls from several
// goroutines are serialized.
type Pool struct {
	threads int
	workers []*poolWorker
	mu      sync.Mutex     // serializes For
	exited  sync.WaitGroup // workers still running (for Close)
	closed  atomic.Bool

	// The current loop, written by For before epoch moves on.
	fn    func(lo, hi int)
	n     int
	chunk int
	next  atomic.Int64
	// epoch counts the loops started (and Close): workers wait for it to
	// move.
	epoch atomic.Uint64
	// pending counts the workers still in the current loop; the last one
	// out wakes the caller if it parked: waiting holds the epoch of the
	// loop the caller parked in (0: none), so that the last worker of a
	// loop the caller already left cannot wake it in the next one.
	pending atomic.Int64
	waiting atomic.Uint64
	done    chan struct{}
}

// poolWorker is a worker's parking place: parked is set while it sleeps on
// wake (or is about to), and whoever clears it sends the wake-up.
type poolWorker struct {
	wake   chan struct{}
	parked atomic.Bool
}

// spinFor is how long a worker watches for the next loop, and the caller
// for the workers' last chunks, before parking. Long enough to bridge the
// host work between two forward passes of a busy scheduler (copying the
// logits out, bookkeeping: 50–200 µs; the sampling itself runs on the
// pool, gpu.HostParallel): at 50 µs the worker parked there about five
// times a step and every wake-up ran the next loop on one thread for
// 85–130 µs. 16 jobs of the 134M model at two threads, decode steps
// against the engine's own: 95.3 % → 99.0 % (means of 18 paired runs).
const spinFor = 300 * time.Microsecond

// NewPool starts a pool of the given number of threads; threads ≤ 0 means
// runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, done: make(chan struct{}, 1)}
	p.exited.Add(threads - 1)
	for range threads - 1 {
		w := &poolWorker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.worker(w)
	}
	return p
}

// Threads returns the number of threads that run loops, the caller's
// included.
func (p *Pool) Threads() int { return p.threads }

func (p *Pool) worker(w *poolWorker) {
	defer p.exited.Done()
	seen := uint64(0)
	for {
		seen = p.await(w, seen)
		if p.closed.Load() {
			return
		}
		p.run()
		if p.pending.Add(-1) == 0 && p.waiting.CompareAndSwap(seen, 0) {
			p.done <- struct{}{}
		}
	}
}

// await returns the epoch once it differs from seen: spinning for spinFor,
// then parked until For or Close wakes w.
//
// A wake-up may come for the loop w has already done: For wakes the parked
// workers after it has started the loop, and a worker that was spinning
// can join the loop, finish it and park again before For's wakeParked
// reaches it. Such a wake-up finds the epoch still at seen, and w parks
// again (taking it for a new loop made w run the loop twice and count
// itself out twice, so that a later loop could return while a worker was
// still in it; under load it hung For).
func (p *Pool) await(w *poolWorker, seen uint64) uint64 {
	if e, ok := spinUntil(func() (uint64, bool) { e := p.epoch.Load(); return e, e != seen }); ok {
		return e
	}
	for {
		w.parked.Store(true)
		if e := p.epoch.Load(); e != seen && w.parked.CompareAndSwap(true, false) {
			return e // moved on while parking: no wake-up was sent
		}
		<-w.wake
		if e := p.epoch.Load(); e != seen {
			return e
		}
	}
}

// spinUntil polls cond for up to spinFor and returns its value once it
// holds, or false.
func spinUntil[T any](cond func() (T, bool)) (T, bool) {
	var start time.Time
	for i := 0; ; i++ {
		if v, ok := cond(); ok {
			return v, true
		}
		if i%8 == 0 {
			if i == 0 {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				var zero T
				return zero, false
			}
			// Other goroutines (the caller's I/O) run here if they are
			// waiting: the spin holds no processor from them.
			runtime.Gosched()
		}
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
	p.forChunks(n, 0, fn)
}

// ForTasks is For with ranges of one iteration: for loops whose
// iterations are already cut for balance (MatMul's tasks, a few per
// thread), where For's chunks of several would leave one thread the last
// few tasks while the others wait.
func (p *Pool) ForTasks(n int, fn func(lo, hi int)) {
	p.forChunks(n, 1, fn)
}

// forChunks runs For with ranges of chunk iterations (0: about
// n/(4·threads)).
func (p *Pool) forChunks(n, chunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.threads == 1 || n == 1 || p.closed.Load() {
		fn(0, n)
		return
	}
	if chunk <= 0 {
		chunks := min(n, 4*p.threads)
		chunk = (n + chunks - 1) / chunks
	}
	p.fn, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	p.pending.Store(int64(len(p.workers)))
	e := p.epoch.Add(1)
	p.wakeParked()
	p.run()
	if _, ok := spinUntil(func() (struct{}, bool) { return struct{}{}, p.pending.Load() == 0 }); !ok {
		p.waiting.Store(e)
		if p.pending.Load() != 0 || !p.waiting.CompareAndSwap(e, 0) {
			<-p.done // the last worker out clears waiting and sends
		}
	}
	p.fn = nil
}

// wakeParked wakes the workers that parked.
func (p *Pool) wakeParked() {
	for _, w := range p.workers {
		if w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
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
	if p.closed.Swap(true) {
		return
	}
	p.epoch.Add(1)
	p.wakeParked()
	p.exited.Wait()
}

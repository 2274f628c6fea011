//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
)

// kvArena is the paged KV cache in one device allocation, block-major, so
// a block moves between tiers in one copy.
type kvArena struct {
	b     *Backend
	cfg   gpu.KVConfig
	bf    int // floats per block
	p     dptr
	stage unsafe.Pointer // pinned, one block, for ReadBlock and WriteBlock
}

func (k *kvArena) Config() gpu.KVConfig { return k.cfg }

func (b *Backend) kv(x gpu.KV) *kvArena {
	k := x.(*kvArena)
	if k.b != b {
		panic("cuda: KV arena of another backend")
	}
	return k
}

// NewKV allocates the arena, zeroed, and a pinned one-block staging buffer.
func (b *Backend) NewKV(cfg gpu.KVConfig) (gpu.KV, error) {
	cfg = cfg.WithDefaults()
	if cfg.Layers <= 0 || cfg.KVDim <= 0 || cfg.Blocks <= 0 || cfg.BlockTokens <= 0 {
		return nil, fmt.Errorf("%w: KV config %+v: layers, kv dim, blocks and block tokens must be positive", gpu.ErrShape, cfg)
	}
	if cfg.Type != gpu.F32 {
		return nil, fmt.Errorf("%w: KV cache type %v on CUDA (its kernels read F32 caches)", gpu.ErrUnsupportedType, cfg.Type)
	}
	bf := cfg.BlockFloats()
	if int64(bf)*4 > 1<<31-1 {
		return nil, fmt.Errorf("%w: KV block of %d floats is too large for the kernels' 32-bit offsets", gpu.ErrShape, bf)
	}
	p, err := b.alloc(int64(bf)*4*int64(cfg.Blocks), true)
	if err != nil {
		return nil, err
	}
	k := &kvArena{b: b, cfg: cfg, bf: bf, p: p}
	err = b.call(func() (err error) {
		k.stage, err = b.eng.dev.hostAlloc(int64(bf) * 4)
		return err
	})
	if err != nil {
		b.release(p)
		return nil, fmt.Errorf("cuda: pinned staging for the KV arena: %w", err)
	}
	st := k.stage
	b.onClose(func() error { return b.eng.dev.hostFree(st) })
	return k, nil
}

func (k *kvArena) block(blk int) dptr {
	if blk < 0 || blk >= k.cfg.Blocks {
		panic(fmt.Sprintf("cuda: KV block %d out of range [0,%d)", blk, k.cfg.Blocks))
	}
	return k.p + dptr(int64(blk)*int64(k.bf)*4)
}

// ReadBlock copies block blk to dst, after the work queued so far, through
// the copy stream. A failure is reported by the next Sync or Read.
func (k *kvArena) ReadBlock(blk int, dst []byte) {
	src := k.block(blk)
	dst = dst[:4*k.bf]
	n := int64(k.bf) * 4
	err := k.b.call(func() error {
		d := k.b.eng.dev
		if err := d.copyWaitsCompute(); err != nil {
			return err
		}
		if err := d.copyOut(k.stage, src, n); err != nil {
			return err
		}
		if err := d.syncCopy(); err != nil {
			return err
		}
		copy(dst, unsafe.Slice((*byte)(k.stage), 4*k.bf))
		return nil
	})
	if err != nil {
		k.b.fail(fmt.Errorf("cuda: reading KV block %d: %w", blk, err))
	}
}

// WriteBlock copies src into block blk, after the work queued so far and
// before the work queued later.
func (k *kvArena) WriteBlock(blk int, src []byte) {
	dst := k.block(blk)
	src = src[:4*k.bf]
	n := int64(k.bf) * 4
	err := k.b.call(func() error {
		d := k.b.eng.dev
		if err := d.syncCopy(); err != nil { // the staging buffer is free
			return err
		}
		copy(unsafe.Slice((*byte)(k.stage), 4*k.bf), src)
		if err := d.copyWaitsCompute(); err != nil {
			return err
		}
		if err := d.copyIn(dst, k.stage, n); err != nil {
			return err
		}
		return d.computeWaitsCopy()
	})
	if err != nil {
		k.b.fail(fmt.Errorf("cuda: writing KV block %d: %w", blk, err))
	}
}

// onClose registers a release to run on the engine goroutine at Close,
// before the device is closed.
func (b *Backend) onClose(fn func() error) { b.closers = append(b.closers, fn) }

// HostPool is page-locked host memory for KV blocks moved off the device
// (the swap tier of preemptive eviction). Copies between it and the arena
// are asynchronous, on the copy stream, so decoding continues while
// blocks move; a Fence says when they are done.
type HostPool struct {
	b      *Backend
	bf     int
	blocks int
	p      unsafe.Pointer
}

// NewHostPool allocates pinned memory for blocks blocks of the arena kv.
// Pinned memory is slow to allocate and cannot be paged out: size the pool
// once, from a host memory budget.
func (b *Backend) NewHostPool(kv gpu.KV, blocks int) (*HostPool, error) {
	k := b.kv(kv)
	if blocks <= 0 {
		return nil, fmt.Errorf("cuda: host pool of %d blocks; want at least 1", blocks)
	}
	hp := &HostPool{b: b, bf: k.bf, blocks: blocks}
	err := b.call(func() (err error) {
		hp.p, err = b.eng.dev.hostAlloc(int64(blocks) * int64(k.bf) * 4)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: pinned host pool of %d blocks: %w", blocks, err)
	}
	p := hp.p
	b.onClose(func() error { return b.eng.dev.hostFree(p) })
	return hp, nil
}

// Blocks returns the number of blocks the pool holds.
func (h *HostPool) Blocks() int { return h.blocks }

// Block returns slot i of the pool. Its contents are defined only when no
// copy involving the slot is in flight (its Fence is done).
func (h *HostPool) Block(i int) []float32 { return unsafe.Slice((*float32)(h.slot(i)), h.bf) }

func (h *HostPool) slot(i int) unsafe.Pointer {
	if i < 0 || i >= h.blocks {
		panic(fmt.Sprintf("cuda: host block %d out of range [0,%d)", i, h.blocks))
	}
	return unsafe.Add(h.p, int64(i)*int64(h.bf)*4)
}

// Fence tracks copies queued on the copy stream.
type Fence struct {
	b *Backend
	f fence
}

// Done reports whether the copies have completed, without waiting.
func (f *Fence) Done() (bool, error) {
	var done bool
	err := f.b.call(func() (err error) {
		done, err = f.f.query()
		return err
	})
	return done, err
}

// Wait blocks until the copies have completed.
func (f *Fence) Wait() error {
	return f.b.call(func() error { return f.f.wait() })
}

// Release frees the fence's event; a released fence must not be used.
func (f *Fence) Release() {
	if f.f != nil {
		ff := f.f
		f.f = nil
		f.b.do(func() error { ff.destroy(); return nil })
	}
}

// SwapOut copies device blocks m.From of kv to host slots m.To of pool,
// after the work queued so far. Work queued later may overwrite the device
// blocks at once (it waits for the copies on the device); the host slots
// may be read once the returned Fence is done.
func (b *Backend) SwapOut(kv gpu.KV, pool *HostPool, moves []BlockMove) (*Fence, error) {
	return b.swap(kv, pool, moves, true, true)
}

// SwapIn copies host slots m.From of pool to device blocks m.To of kv.
// Work queued after SwapIn sees the blocks; the host slots may be reused
// once the returned Fence is done.
func (b *Backend) SwapIn(kv gpu.KV, pool *HostPool, moves []BlockMove) (*Fence, error) {
	return b.swap(kv, pool, moves, false, true)
}

// swap queues the block copies of SwapOut (out) or SwapIn on the copy
// stream, between the compute stream's work before and after them: the
// copies wait for the kernels queued so far (which may still read or write
// the blocks), and kernels queued later wait for the copies. With fenced
// it returns a Fence for the copies.
func (b *Backend) swap(kv gpu.KV, pool *HostPool, moves []BlockMove, out, fenced bool) (*Fence, error) {
	k := b.kv(kv)
	if pool.b != b || pool.bf != k.bf {
		return nil, fmt.Errorf("%w: host pool of %d-float blocks for an arena of %d", gpu.ErrShape, pool.bf, k.bf)
	}
	type mv struct {
		d dptr
		h unsafe.Pointer
	}
	if err := gpu.CheckMoves(moves, out, k.cfg.Blocks, pool.blocks); err != nil {
		return nil, err
	}
	ms := make([]mv, len(moves))
	for i, m := range moves {
		if out {
			ms[i] = mv{k.block(m.From), pool.slot(m.To)}
		} else {
			ms[i] = mv{k.block(m.To), pool.slot(m.From)}
		}
	}
	n := int64(k.bf) * 4
	var fe *Fence
	err := b.call(func() error {
		d := b.eng.dev
		if err := d.copyWaitsCompute(); err != nil {
			return err
		}
		for _, m := range ms {
			var err error
			if out {
				err = d.copyOut(m.h, m.d, n)
			} else {
				err = d.copyIn(m.d, m.h, n)
			}
			if err != nil {
				return err
			}
		}
		if fenced {
			f, err := d.fence()
			if err != nil {
				return err
			}
			fe = &Fence{b: b, f: f}
		}
		return d.computeWaitsCopy()
	})
	if err != nil {
		dir := "in"
		if out {
			dir = "out"
		}
		return nil, fmt.Errorf("cuda: swapping %s %d blocks: %w", dir, len(moves), err)
	}
	return fe, nil
}

// Time queues the operations f issues between two events on the compute
// stream, waits for them, and returns the device time they took.
func (b *Backend) Time(f func()) (time.Duration, error) {
	var start, stop fence
	if err := b.call(func() (err error) { start, err = b.eng.dev.timer(); return err }); err != nil {
		return 0, err
	}
	f()
	var ms float64
	err := b.call(func() (err error) {
		defer start.destroy()
		if stop, err = b.eng.dev.timer(); err != nil {
			return err
		}
		defer stop.destroy()
		if err = b.eng.dev.sync(); err != nil {
			return err
		}
		ms, err = b.eng.dev.elapsed(start, stop)
		return err
	})
	return time.Duration(ms * float64(time.Millisecond)), err
}

// cudaTier is the gpu.HostTier of a CUDA arena: a HostPool, with copies on
// the copy stream. Both directions go through that one stream, so copies
// run in the order they were queued, as the interface requires.
type cudaTier struct {
	b    *Backend
	kv   gpu.KV
	pool *HostPool
}

// NewHostTier returns a tier of blocks pinned slots for the arena kv: the
// scheduler's swap tier on this backend (gpu.Swapper).
func (b *Backend) NewHostTier(kv gpu.KV, blocks int) (gpu.HostTier, error) {
	pool, err := b.NewHostPool(kv, blocks)
	if err != nil {
		return nil, err
	}
	return &cudaTier{b: b, kv: kv, pool: pool}, nil
}

func (t *cudaTier) Blocks() int { return t.pool.Blocks() }

// Out and In need no fence: the tier's copies are ordered by the streams.
func (t *cudaTier) Out(moves []gpu.BlockMove) error {
	_, err := t.b.swap(t.kv, t.pool, moves, true, false)
	return err
}

func (t *cudaTier) In(moves []gpu.BlockMove) error {
	_, err := t.b.swap(t.kv, t.pool, moves, false, false)
	return err
}

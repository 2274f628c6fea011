package engine

import "github.com/zerolayer/zerolayer/gpu"

// kvPool hands out the blocks of one arena.
type kvPool struct {
	arena gpu.KV
	free  []int32
}

func newKVPool(arena gpu.KV) *kvPool {
	n := arena.Config().Blocks
	p := &kvPool{arena: arena, free: make([]int32, n)}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i)
	}
	return p
}

func (p *kvPool) capacity() int { return p.arena.Config().Blocks }

// take returns a free block. Callers check capacity before a batch starts.
func (p *kvPool) take() int32 {
	b := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return b
}

func (p *kvPool) release(blocks []int32) { p.free = append(p.free, blocks...) }

package sched

import (
	"container/list"
	"encoding/binary"
	"hash/maphash"
)

// blockManager tracks the KV arena's blocks: reference counts, the free
// list, and the prefix cache (full blocks indexed by the hash of their
// contents and everything before them). A cached block nobody references
// stays cached until its memory is needed (least recently used first).
//
// It is owned by the scheduler's step loop; not safe for concurrent use.
type blockManager struct {
	n      int
	free   []int32
	ref    []int32
	hashOf []uint64 // 0: not in the cache
	cache  map[uint64]int32
	lru    *list.List // cached blocks with ref 0, oldest first
	lruEl  []*list.Element
	seed   maphash.Seed

	// stats
	hits, lookups uint64
}

func newBlockManager(n int) *blockManager {
	bm := &blockManager{n: n, free: make([]int32, n), ref: make([]int32, n), hashOf: make([]uint64, n),
		cache: map[uint64]int32{}, lru: list.New(), lruEl: make([]*list.Element, n), seed: maphash.MakeSeed()}
	for i := range bm.free {
		bm.free[i] = int32(n - 1 - i)
	}
	return bm
}

// available counts the blocks that can be handed out now: free ones and
// cached ones nobody references.
func (bm *blockManager) available() int { return len(bm.free) + bm.lru.Len() }

// used counts blocks referenced by at least one sequence.
func (bm *blockManager) used() int { return bm.n - bm.available() }

// cached counts blocks in the prefix cache (referenced or not).
func (bm *blockManager) cached() int { return len(bm.cache) }

// alloc hands out a block with one reference, evicting the least recently
// used unreferenced cached block when the free list is empty.
func (bm *blockManager) alloc() (int32, bool) {
	if len(bm.free) == 0 {
		el := bm.lru.Front()
		if el == nil {
			return 0, false
		}
		b := el.Value.(int32)
		bm.lru.Remove(el)
		bm.lruEl[b] = nil
		delete(bm.cache, bm.hashOf[b])
		bm.hashOf[b] = 0
		bm.free = append(bm.free, b)
	}
	b := bm.free[len(bm.free)-1]
	bm.free = bm.free[:len(bm.free)-1]
	bm.ref[b] = 1
	return b, true
}

// release drops one reference; an unreferenced block returns to the free
// list, or to the LRU list when it is in the prefix cache.
func (bm *blockManager) release(b int32) {
	if bm.ref[b] <= 0 {
		panic("sched: block released more often than referenced")
	}
	bm.ref[b]--
	if bm.ref[b] > 0 {
		return
	}
	if bm.hashOf[b] != 0 {
		bm.lruEl[b] = bm.lru.PushBack(b)
		return
	}
	bm.free = append(bm.free, b)
}

// lookup returns the cached block with hash h, with a new reference.
func (bm *blockManager) lookup(h uint64) (int32, bool) {
	bm.lookups++
	b, ok := bm.cache[h]
	if !ok {
		return 0, false
	}
	bm.hits++
	if bm.ref[b] == 0 {
		bm.lru.Remove(bm.lruEl[b])
		bm.lruEl[b] = nil
	}
	bm.ref[b]++
	return b, true
}

// register puts a full block in the prefix cache under h, unless another
// block already holds the same contents.
func (bm *blockManager) register(b int32, h uint64) {
	if _, ok := bm.cache[h]; ok || bm.hashOf[b] != 0 {
		return
	}
	bm.cache[h] = b
	bm.hashOf[b] = h
}

// chainHash returns the hash of a full block of tokens following a prefix
// whose hash is prev. It is never 0.
func (bm *blockManager) chainHash(prev uint64, tokens []int32) uint64 {
	var h maphash.Hash
	h.SetSeed(bm.seed)
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], prev)
	h.Write(buf[:])
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(buf[:4], uint32(t))
		h.Write(buf[:4])
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// check verifies the accounting: every block is exactly one of free,
// referenced, or cached-unreferenced. Tests call it.
func (bm *blockManager) check() error {
	seen := make([]int, bm.n)
	for _, b := range bm.free {
		seen[b]++
		if bm.ref[b] != 0 || bm.hashOf[b] != 0 {
			return errf("free block %d has ref %d hash %x", b, bm.ref[b], bm.hashOf[b])
		}
	}
	for el := bm.lru.Front(); el != nil; el = el.Next() {
		b := el.Value.(int32)
		seen[b]++
		if bm.ref[b] != 0 || bm.hashOf[b] == 0 {
			return errf("LRU block %d has ref %d hash %x", b, bm.ref[b], bm.hashOf[b])
		}
	}
	for b := range seen {
		if bm.ref[b] > 0 {
			seen[b]++
		}
		if seen[b] != 1 {
			return errf("block %d is in %d states (ref %d)", b, seen[b], bm.ref[b])
		}
	}
	for h, b := range bm.cache {
		if bm.hashOf[b] != h {
			return errf("cache entry %x → block %d whose hash is %x", h, b, bm.hashOf[b])
		}
	}
	return nil
}

//go:build cuda || cudaemu

package cuda

import (
	"encoding/binary"
	"hash/fnv"
)

// CUDA graphs. A decode step launches a few hundred small kernels, and
// launching them one by one costs more CPU time than the GPU needs to run
// them. So the backend records each segment of queued work (everything
// between two points where the caller waits: Read, Sync, an allocation)
// and, when the same segment is queued again, with the same kernels, grid
// sizes and parameters, captures it into a CUDA graph once and replays the
// graph from then on, one launch per step. Steps of a decode loop repeat
// exactly: the data that changes (token ids, positions, block tables) lives
// in device buffers that the kernels read, not in their parameters.
//
// A segment qualifies when it holds only kernel launches and uploads of
// staged metadata (see stage). The uploads run first, then the graph: this
// is the queued order unless a kernel queued before an upload reads the
// buffer the upload rewrites, which disqualifies the segment.

// graphEntry is a segment seen before: its launches, and once captured its
// graph (engine goroutine only).
type graphEntry struct {
	sig  []op // the launches, in order
	seen int  // times queued
	used uint64

	// Engine goroutine only.
	graph  graph
	failed bool // capture failed: launch one by one
}

const (
	maxGraphs     = 16   // segments remembered
	minGraphOps   = 8    // shorter segments are launched as they are
	maxSegmentOps = 4096 // longer segments are handed over early, not graphed
)

func sameLaunch(a, b *op) bool {
	return a.k == b.k && a.grid == b.grid && a.block == b.block && a.nargs == b.nargs && a.args == b.args
}

func hashLaunches(ops []op) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range ops {
		o := &ops[i]
		binary.LittleEndian.PutUint64(b[:], uint64(o.k)|uint64(o.grid[0])<<16|uint64(o.grid[1])<<40)
		h.Write(b[:])
		for _, a := range o.args[:o.nargs] {
			binary.LittleEndian.PutUint64(b[:], a)
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// SetGraphs turns CUDA graphs on or off from now on (Config.NoGraphs sets
// the initial state), for comparing the two.
func (b *Backend) SetGraphs(on bool) {
	b.endSegment()
	b.cfg.NoGraphs = !on
}

// endSegment hands the queue to the engine at a point where the caller is
// about to wait, replaying or capturing a graph when the segment repeats.
func (b *Backend) endSegment() {
	q := b.queue
	if b.cfg.NoGraphs || b.segmentLong || len(q) < minGraphOps {
		b.segmentLong = false
		b.flush()
		return
	}
	var ups, launches []op
	for i := range q {
		o := &q[i]
		switch o.kind {
		case opLaunch:
			launches = append(launches, *o)
		case opUpload:
			if o.hoist == 0 || readsBefore(q[:i], o.dst, o.hoist) {
				b.flush()
				return
			}
			ups = append(ups, *o)
		default:
			b.flush()
			return
		}
	}
	h := hashLaunches(launches)
	e := b.graphs[h]
	if e == nil || len(e.sig) != len(launches) || !sameLaunches(e.sig, launches) {
		b.remember(h, &graphEntry{sig: launches, seen: 1})
		b.flush()
		return
	}
	b.graphUse++
	e.used = b.graphUse
	e.seen++
	b.queue = append(append(b.eng.batch(len(ups)+1), ups...), op{kind: opGraph, g: e})
	b.flush()
}

func sameLaunches(a, b []op) bool {
	for i := range a {
		if !sameLaunch(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// readsBefore reports whether a launch in ops takes a pointer into
// [p, p+n).
func readsBefore(ops []op, p dptr, n int64) bool {
	for i := range ops {
		o := &ops[i]
		if o.kind != opLaunch {
			continue
		}
		for j, a := range o.args[:o.nargs] {
			if kernelSpecs[o.k].args[j] == aPtr && a >= uint64(p) && a < uint64(p)+uint64(n) {
				return true
			}
		}
	}
	return false
}

// remember adds a segment, forgetting the least recently used one (and
// destroying its graph) when there are maxGraphs.
func (b *Backend) remember(h uint64, e *graphEntry) {
	b.graphUse++
	e.used = b.graphUse
	if old, ok := b.graphs[h]; ok {
		b.dropGraph(old)
	} else if len(b.graphs) >= maxGraphs {
		var lru uint64
		var victim *graphEntry
		for k, g := range b.graphs {
			if victim == nil || g.used < victim.used {
				lru, victim = k, g
			}
		}
		delete(b.graphs, lru)
		b.dropGraph(victim)
	}
	b.graphs[h] = e
}

// dropGraph queues the destruction of e's graph.
func (b *Backend) dropGraph(e *graphEntry) {
	b.queue = append(b.queue, op{kind: opFunc, fn: func() error {
		if e.graph == nil {
			return nil
		}
		err := b.eng.dev.sync()
		e.graph.destroy()
		e.graph = nil
		return err
	}})
}

// runGraph runs a repeated segment's launches: through its graph,
// capturing it the first time, or one by one if capture failed.
func (e *engine) runGraph(g *graphEntry) error {
	if g.graph == nil && !g.failed {
		gr, err := e.captureLaunches(g.sig)
		if err != nil {
			g.failed = true
			e.stats.GraphFailures++
			e.stats.LastGraphError = err.Error()
		} else {
			g.graph = gr
			e.stats.GraphCaptures++
		}
	}
	if g.graph != nil {
		// Captured launches are counted once, when captured.
		e.stats.GraphLaunches++
		return g.graph.launch()
	}
	for i := range g.sig {
		if err := e.launchOp(&g.sig[i]); err != nil {
			return err
		}
	}
	return nil
}

// captureLaunches records ops into a graph on the compute stream, without
// running them.
func (e *engine) captureLaunches(ops []op) (graph, error) {
	if err := e.dev.beginCapture(); err != nil {
		return nil, err
	}
	var first error
	for i := range ops {
		if err := e.launchOp(&ops[i]); err != nil && first == nil {
			first = err
		}
	}
	g, err := e.dev.endCapture()
	if first == nil {
		first = err
	}
	if first != nil {
		if g != nil {
			g.destroy()
		}
		return nil, first
	}
	return g, nil
}

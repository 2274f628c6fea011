package grammar

import (
	"encoding/binary"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// Run is one generation's state under a Machine.
type Run struct {
	m       *Machine
	threads []thread
	work    int64
	sw      setWalker
	lw      leafWalker
	lex     []LexState
	scratch []thread
	// For exit walks: the walk's one starting thread, the nodes it
	// allows, and the offsets allowed per subtree shape (one leafMask).
	one       [1]thread
	probe     []thread
	nodes     []int32
	exitMemo  map[exitKey][]int32
	exitAlive map[int32]*[256]int8
}

// NewRun starts a parse of m's language at its beginning.
func NewRun(m *Machine) *Run {
	r := &Run{m: m}
	r.sw.m = m
	r.lw.m = m
	r.exitMemo = make(map[exitKey][]int32)
	r.exitAlive = make(map[int32]*[256]int8)
	r.Reset()
	return r
}

// Reset takes the run back to the start, before any output.
func (r *Run) Reset() {
	r.threads = r.m.start()
}

// setWalker walks the trie with a set of threads.
type setWalker struct {
	m    *Machine
	lv   [][]thread
	work *int64
	over bool // too many threads
	// alive[d], when set, records per byte whether it keeps lv[d]'s one
	// thread alive (1) or kills it (2). The record belongs to the thread's
	// value (memo), so nodes with the same state (after "1", "2", ... in a
	// number; after a string's opening quote) share it: in a large
	// vocabulary most children of such nodes die, and a dead byte is then
	// known without stepping.
	alive []*[256]int8
	memo  map[thread]*[256]int8
	slab  [][256]int8 // the records, reused from one mask to the next
}

// memoBelow is the least subtree size (in nodes) for which a walk
// records the bytes alive after a node.
const memoBelow = 64

// maxMemo bounds the records of one mask (256 bytes each).
const maxMemo = 256

// reset forgets the records; Mask calls it first.
func (w *setWalker) reset() {
	clear(w.memo)
	w.slab = w.slab[:0]
}

func (w *setWalker) init(ts []thread, maxDepth int) {
	if len(w.lv) < maxDepth+2 {
		w.lv = make([][]thread, maxDepth+2)
		w.alive = make([]*[256]int8, maxDepth+2)
	}
	w.lv[0] = append(w.lv[0][:0], ts...)
	w.alive[0] = nil
	if len(ts) == 1 {
		w.alive[0] = w.memoOf(ts[0])
	}
}

// memoOf returns the alive-byte record of thread th, or nil when this
// mask has made maxMemo of them.
func (w *setWalker) memoOf(th thread) *[256]int8 {
	if w.memo == nil {
		w.memo = make(map[thread]*[256]int8)
	}
	if a := w.memo[th]; a != nil {
		return a
	}
	if len(w.slab) == cap(w.slab) {
		if len(w.slab) >= maxMemo {
			return nil
		}
		// A new slab: records already handed out keep the old one.
		w.slab = make([][256]int8, 0, min(maxMemo, 2*cap(w.slab)+16))
		clear(w.memo)
	}
	w.slab = w.slab[:len(w.slab)+1]
	a := &w.slab[len(w.slab)-1]
	*a = [256]int8{}
	w.memo[th] = a
	return a
}

func (w *setWalker) Step(d int, b byte, node int32) bool {
	a := w.alive[d-1]
	if a != nil && a[b] == 2 {
		return false
	}
	cur := w.lv[d-1]
	nxt := w.lv[d][:0]
	for _, th := range cur {
		nxt = w.m.step(th, b, nxt, w.work)
	}
	nxt = dedupe(nxt)
	w.lv[d] = nxt
	w.alive[d] = nil
	if len(nxt) == 0 {
		if a != nil {
			a[b] = 2
		}
		return false
	}
	if a != nil {
		a[b] = 1
	}
	if len(nxt) > w.m.maxThreads {
		w.over = true
		return false
	}
	if len(nxt) == 1 && w.m.vi.SubtreeEnd[node]-node > memoBelow {
		w.alive[d] = w.memoOf(nxt[0])
	}
	return true
}

// Whole reports whether every token below node (depth d) keeps the
// walk's one thread inside the string it is in: plain text that fits the
// string's maxLength and that its pattern, if any, takes whatever it is.
func (w *setWalker) Whole(d int, node int32) bool {
	ts := w.lv[d]
	if len(ts) != 1 || ts[0].f.kind != fString {
		return false
	}
	x := &ts[0].f
	vi := w.m.vi
	s := x.n.String
	if x.ph != 0 || x.UTF8Pending != 0 || !vi.PlainBelow[node] || x.cnt+int32(vi.MaxBelow[node]) > s.MaxLen ||
		!lenSure(s, x.cnt, int32(vi.MaxBelow[node])) {
		return false
	}
	if dd := s.DFA; dd != nil {
		return x.ds.Live == dd.AllComponents && (dd.SafeFrom(x.ds, &plainBytes) ||
			vi.ASCIIBelow[node] && vi.SubBytes[node].SubsetOf(dd.LoopSet(x.ds)))
	}
	return true
}

// leafWalker holds the per-depth frames of a key walk.
type leafWalker struct {
	m  *Machine
	st []frame
}

// leafKeyOf returns the cache key of leaf frame f, and the cache to use.
func (m *Machine) leafKeyOf(f *frame) (vocab.LeafKey, *vocab.LeafCache) {
	L := int32(m.vi.MaxLen) + 1
	clampR := func(v int32) int32 {
		if v < 0 {
			return 0
		}
		if v > L {
			return L
		}
		return v
	}
	k := vocab.LeafKey{Kind: f.kind, Phase: f.ph, UTF8Pending: f.UTF8Pending, UTF8Lo: f.UTF8Lo, UTF8Hi: f.UTF8Hi, Flag: f.flag, DFAState: f.ds}
	if f.kind == fString {
		s := f.n.String
		k.MinLeft = clampR(s.MinLen - f.cnt)
		k.MaxLeft = clampR(s.MaxLen - f.cnt)
		if s.DFA != nil {
			// lenRoom tells apart what is left up to MinCharsCap
			// characters past a token's length.
			k.MaxLeft = min(max(s.MaxLen-f.cnt, 0), L+automaton.MinCharsCap)
		}
		if f.ph >= 2 {
			k.Detail = f.aux
		}
		if s.DFA == nil {
			return k, &m.vi.StringCache
		}
		// The entry depends on the node only through its DFA and the
		// clamped bounds above, so string nodes with one pattern or format
		// (the schema compiler shares a DFA between them) share entries.
		k.Owner = s.DFA
		return k, &m.cache
	}
	os := f.n.Object
	k.Owner = os
	k.Detail = f.aux
	k.MinLeft = clampR(os.MinKeyLen - f.cnt)
	if os.MaxKeyLen == math.MaxInt32 {
		k.MaxLeft = L
	} else {
		k.MaxLeft = clampR(os.MaxKeyLen - f.cnt)
	}
	// Where any key may be added (FreeKey), a key frame reads the seen
	// properties nowhere (keyStep checks them only on the known-key trie
	// of a closed object; a repeated key is refused when it ends, in
	// finish, against the object frame): one entry serves every seen set.
	if !os.FreeKey {
		k.Seen = f.seen
		if f.seenX != nil {
			k.SeenExtra = seenKey(*f.seenX)
		}
	}
	return k, &m.cache
}

// plainLeaf reports whether leaf frame f treats every plain token alike
// (no pattern, not inside an escape or a character), and how many code
// points may still be added.
func (m *Machine) plainLeaf(f *frame) (int32, bool) {
	if f.ph != 0 || f.UTF8Pending != 0 {
		return 0, false
	}
	L := int32(m.vi.MaxLen)
	var rmax int32
	if f.kind == fString {
		s := f.n.String
		if s.DFA != nil {
			return 0, false
		}
		rmax = s.MaxLen - f.cnt
	} else {
		os := f.n.Object
		if !os.FreeKey || os.KeyDFA != nil || f.flag&kfSawEsc != 0 || os.longKeys && f.flag&kfOff == 0 {
			return 0, false
		}
		rmax = os.MaxKeyLen - f.cnt
	}
	if rmax > L {
		rmax = L
	}
	if rmax < 0 {
		rmax = 0
	}
	return rmax, true
}

// fastLeaf computes a plain leaf's entry: the plain tokens that fit (the
// index's own bitset, shared), then each special token that such a state
// may take, simulated on its own from the end of its plain prefix.
func (r *Run) fastLeaf(start frame, rmax int32) *vocab.LeafEntry {
	m, vi := r.m, r.m.vi
	var extra []int32
	var exits []vocab.LeafExit
	text, nodes, off := vi.SpecialText, vi.SpecialNode, vi.SpecialStart
	// The simulation of a token depends only on its bytes, so a token
	// through the trie node where the previous one stopped (ended the
	// leaf there, or died) stops there too, with the exit already noted.
	// LeafSpecials are in byte order, so such tokens come in runs.
	stop, stopAt := int32(-1), 0
	for _, i := range vi.LeafSpecials {
		tok := vi.Special[i]
		p := text[off[i]:off[i+1]]
		if stop >= 0 && len(p) > stopAt && nodes[int(off[i])+stopAt] == stop {
			continue
		}
		stop = -1
		f := start.LexState
		ff := start
		// The plain prefix only adds code points (to a string, or to a key
		// off the known-key trie): take it at once when it fits, else
		// step it to find where it dies. A key is stepped until it leaves
		// the known-key trie, then takes the rest of the prefix at once.
		k0, plain := 0, int(vi.SpecialPlain[i])
		if n := vi.SpecialPlainRunes[i]; start.kind == fString && start.cnt+n <= start.n.String.MaxLen {
			f.cnt += n
			k0 = plain
		}
		jumped := start.kind == fString
		for k := k0; k < len(p); k++ {
			c := p[k]
			var res int
			var payload int32
			if start.kind == fString {
				res, payload = strLex(&f, start.n.String, c, &r.work)
			} else {
				if !jumped && ff.flag&kfOff != 0 && ff.UTF8Pending == 0 && k < plain {
					jumped = true
					if n := int32(utf8.RuneCount(p[k:plain])); ff.cnt+n <= start.n.Object.MaxKeyLen {
						ff.cnt += n
						if k = plain; k >= len(p) {
							break
						}
						c = p[k]
					}
				}
				res, payload = m.keyStep(&ff, c, &r.work)
			}
			if res == rCont {
				if k == len(p)-1 {
					extra = append(extra, tok)
				}
				continue
			}
			node := nodes[int(off[i])+k]
			if res == rDone {
				if n := len(exits); n == 0 || exits[n-1].Node != node {
					exits = append(exits, vocab.LeafExit{Node: node, Payload: payload})
				}
			}
			stop, stopAt = node, k
			break
		}
	}
	// Exits are visited once per node.
	sort.Slice(exits, func(i, j int) bool { return exits[i].Node < exits[j].Node })
	out := exits[:0]
	for i, e := range exits {
		if i == 0 || e.Node != exits[i-1].Node {
			out = append(out, e)
		}
	}
	return &vocab.LeafEntry{Inside: vi.PlainUpTo[rmax], Extra: extra, Exits: out, SharedInside: true}
}

// plainASCII are the bytes a JSON string takes as themselves.
var plainASCII = func() automaton.ByteSet {
	var s automaton.ByteSet
	for b := 0x20; b < 0x80; b++ {
		if b != '"' && b != '\\' {
			s.Add(byte(b))
		}
	}
	return s
}()

// plainBytes are the bytes plain string text is made of.
var plainBytes = func() automaton.ByteSet {
	s := plainASCII
	for b := 0x80; b < 0x100; b++ {
		s.Add(byte(b))
	}
	return s
}()

// walkStrLeaf computes a string leaf's entry with a walk of the whole trie,
// keeping only the lexical state per depth.
func (r *Run) walkStrLeaf(start frame, f *limit.Fuel) (*vocab.LeafEntry, error) {
	vi := r.m.vi
	s := start.n.String
	if len(r.lex) < vi.MaxLen+2 {
		r.lex = make([]LexState, vi.MaxLen+2)
	}
	st := r.lex
	st[0] = start.LexState
	inside := make([]uint64, vi.Words)
	var exits []vocab.LeafExit
	nb, nd, nn, off := vi.NodeByte, vi.NodeDepth, vi.SubtreeEnd, vi.TokenStart
	end := int32(len(nb))
	spent := int64(0)
	dd := s.DFA
	for i := int32(0); i < end; {
		d := nd[i]
		x := st[d-1]
		c := nb[i]
		spent++
		// Fast path: a plain ASCII byte in a pattern-constrained string.
		if dd != nil && x.ph == 0 && x.UTF8Pending == 0 && c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && x.cnt < s.MaxLen {
			n := x.ds.Next
			var ns *automaton.State
			if n != nil {
				ns = n[dd.ByteClasses[c]].Load()
			}
			if ns == nil {
				ns = dd.Step(x.ds, c, &r.work)
			}
			if ns.Live != dd.AllComponents || !lenRoom(s, x.cnt+1, ns) {
				i = nn[i]
				continue
			}
			x.ds = ns
			x.cnt++
			st[d] = x
			if off[i] != off[i+1] {
				vi.SetNode(inside, i)
			}
			// Everything below stays in this state: take the subtree whole.
			if nn[i] != i+1 && x.cnt+int32(vi.MaxBelow[i]) <= s.MaxLen && vi.PlainBelow[i] && lenSure(s, x.cnt, int32(vi.MaxBelow[i])) {
				if dd.SafeFrom(ns, &plainBytes) || vi.ASCIIBelow[i] && vi.SubBytes[i].SubsetOf(dd.LoopSet(ns)) {
					vi.SetSubtree(inside, i)
					i = nn[i]
					continue
				}
			}
			i++
			continue
		}
		res, _ := strLex(&x, s, c, &r.work)
		if res == rCont {
			st[d] = x
			if off[i] != off[i+1] {
				vi.SetNode(inside, i)
			}
			i++
			continue
		}
		if res == rDone {
			exits = append(exits, vocab.LeafExit{Node: i})
		}
		i = nn[i]
		if spent > 4096 {
			if err := f.Spend(spent + r.work); err != nil {
				return nil, err
			}
			spent, r.work = 0, 0
		}
	}
	if err := f.Spend(spent); err != nil {
		return nil, err
	}
	return &vocab.LeafEntry{Inside: inside, Exits: exits}, nil
}

// walkKeyLeaf computes a key leaf's entry with a walk of the whole trie;
// off the known-key trie, a subtree of plain text that keeps the key
// automaton live is taken whole.
func (r *Run) walkKeyLeaf(start frame, f *limit.Fuel) (*vocab.LeafEntry, error) {
	m, vi := r.m, r.m.vi
	os := start.n.Object
	lw := &r.lw
	if len(lw.st) < vi.MaxLen+2 {
		lw.st = make([]frame, vi.MaxLen+2)
	}
	st := lw.st
	st[0] = start
	inside := make([]uint64, vi.Words)
	var exits []vocab.LeafExit
	nb, nd, nn, off := vi.NodeByte, vi.NodeDepth, vi.SubtreeEnd, vi.TokenStart
	end := int32(len(nb))
	spent := int64(0)
	for i := int32(0); i < end; {
		d := nd[i]
		st[d] = st[d-1]
		x := &st[d]
		res, payload := m.keyStep(x, nb[i], &r.work)
		spent++
		if spent > 4096 {
			if err := f.Spend(spent + r.work); err != nil {
				return nil, err
			}
			spent, r.work = 0, 0
		}
		if res == rDone {
			exits = append(exits, vocab.LeafExit{Node: i, Payload: payload})
		}
		if res != rCont {
			i = nn[i]
			continue
		}
		if off[i] != off[i+1] {
			vi.SetNode(inside, i)
		}
		if x.flag&kfOff != 0 && x.ph == 0 && x.UTF8Pending == 0 && nn[i] != i+1 && vi.PlainBelow[i] &&
			x.cnt+int32(vi.MaxBelow[i]) <= os.MaxKeyLen && (os.KeyDFA == nil || os.KeyDFA.SafeFrom(x.ds, &plainBytes)) {
			vi.SetSubtree(inside, i)
			i = nn[i]
			continue
		}
		i++
	}
	if err := f.Spend(spent); err != nil {
		return nil, err
	}
	return &vocab.LeafEntry{Inside: inside, Exits: exits}, nil
}

// seenKey turns a property bitset into a comparable cache-key part.
func seenKey(s []uint64) string {
	b := make([]byte, 0, len(s)*8)
	for _, w := range s {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return string(b)
}

// leafMask ORs into dst the tokens allowed for thread th, whose top is a
// string or key frame.
func (r *Run) leafMask(th thread, dst []uint64, f *limit.Fuel) error {
	m := r.m
	vi := m.vi
	key, cache := m.leafKeyOf(&th.f)
	e := cache.Get(key)
	if e == nil {
		var err error
		if rmax, ok := m.plainLeaf(&th.f); ok {
			e = r.fastLeaf(th.f, rmax)
		} else if th.f.kind == fString {
			if e, err = r.walkStrLeaf(th.f, f); err != nil {
				return err
			}
		} else if e, err = r.walkKeyLeaf(th.f, f); err != nil {
			return err
		}
		if err := f.Spend(int64(len(vi.Special)) + r.work); err != nil {
			return err
		}
		r.work = 0
		e = cache.Put(key, e, m.Meter)
	}
	vocab.OrMask(dst, e.Inside)
	for _, t := range e.Extra {
		dst[t>>6] |= 1 << (uint(t) & 63)
	}
	// Tokens that leave the leaf: finish it, then check the rest of each
	// token against the enclosing frames. Exits with the same payload
	// continue from the same state; below an exit node, a child whose
	// byte that state refuses is skipped (the answer per byte is kept),
	// and the walk under a live child is done once per (payload, byte,
	// subtree shape) and replayed, as offsets, for the others.
	clear(r.exitMemo)
	clear(r.exitAlive)
	var lastPayload int32
	var lastTh thread
	var alive *[256]int8
	lastOK, have := false, false
	base := thread{rest: th.rest}
	// A string item of a uniqueItems array may end only as a value the
	// array does not hold: each exit is checked with the text the token
	// adds before its closing quote. Its exits each continue from a state
	// of their own (the array's values differ), so nothing is shared
	// between them.
	uq := th.f.kind == fString && th.f.flag&uqItem != 0
	var uqAlive [256]int8
	nn, nb := vi.SubtreeEnd, vi.NodeByte
	for _, ex := range e.Exits {
		if uq {
			f := th.f
			f.txt += m.quotes.before(vi, ex.Node)
			lastTh, lastOK = m.finish(thread{f: f, rest: th.rest}, ex.Payload)
			have = false
			uqAlive = [256]int8{}
			alive = &uqAlive
		} else if !have || ex.Payload != lastPayload {
			lastTh, lastOK = m.finish(base, ex.Payload)
			lastPayload, have = ex.Payload, true
			if alive = r.exitAlive[ex.Payload]; alive == nil {
				alive = new([256]int8)
				r.exitAlive[ex.Payload] = alive
			}
		}
		if !lastOK {
			continue
		}
		vi.SetNode(dst, ex.Node)
		for c := ex.Node + 1; c < nn[ex.Node]; c = nn[c] {
			b := nb[c]
			if alive[b] == 0 {
				alive[b] = 2
				if r.probe = m.step(lastTh, b, r.probe[:0], &r.work); len(r.probe) > 0 {
					alive[b] = 1
				}
			}
			if alive[b] != 1 {
				continue
			}
			key := exitKey{payload: ex.Payload, b: b, shape: vi.Shape[c]}
			offs, ok := r.exitMemo[key]
			if !ok || uq {
				r.one[0] = lastTh
				r.sw.init(r.one[:], vi.MaxLen)
				r.sw.work = &r.work
				nodes, err := vi.WalkChild(ex.Node, c, &r.sw, r.nodes[:0], f)
				r.nodes = nodes
				if err != nil {
					return err
				}
				if r.sw.over {
					r.sw.over = false
					return limit.ErrTooManyThreads
				}
				offs = make([]int32, len(nodes))
				for i, n := range nodes {
					offs[i] = n - c
				}
				if !uq {
					r.exitMemo[key] = offs
				}
			}
			for _, o := range offs {
				vi.SetNode(dst, c+o)
			}
		}
	}
	return nil
}

// exitKey identifies the walk under one child of a leaf's exit node.
type exitKey struct {
	payload int32
	b       byte
	shape   int32
}

// Mask fills dst with the tokens the grammar allows next and reports
// whether it may end here.
func (r *Run) Mask(dst []uint64, f *limit.Fuel) (eog bool, err error) {
	vocab.ClearMask(dst)
	r.sw.reset()
	vi := r.m.vi
	r.scratch = r.scratch[:0]
	for _, th := range r.threads {
		if th.f.kind == fString || th.f.kind == fKey {
			if err := r.leafMask(th, dst, f); err != nil {
				return false, err
			}
		} else {
			r.scratch = append(r.scratch, th)
		}
		if r.m.canEnd(th) {
			eog = true
		}
	}
	if len(r.scratch) > 0 {
		r.sw.init(r.scratch, vi.MaxLen)
		r.sw.work = &r.work
		if err := vi.Walk(-1, &r.sw, dst, f); err != nil {
			return false, err
		}
		if r.sw.over {
			r.sw.over = false
			return false, limit.ErrTooManyThreads
		}
	}
	if err := f.Spend(r.work); err != nil {
		return false, err
	}
	r.work = 0
	return eog, nil
}

// Accept advances by the bytes of a token; false when no thread survives.
func (r *Run) Accept(p []byte, f *limit.Fuel) (bool, error) {
	cur := r.threads
	for _, c := range p {
		nxt := make([]thread, 0, len(cur))
		for _, th := range cur {
			nxt = r.m.step(th, c, nxt, &r.work)
		}
		nxt = dedupe(nxt)
		if err := f.Spend(int64(len(cur)) + r.work); err != nil {
			return false, err
		}
		r.work = 0
		if len(nxt) == 0 {
			return false, nil
		}
		if len(nxt) > r.m.maxThreads {
			return false, limit.ErrTooManyThreads
		}
		cur = nxt
	}
	r.threads = cur
	return true, nil
}

// CanEnd reports whether the output may end here.
func (r *Run) CanEnd() bool {
	for _, th := range r.threads {
		if r.m.canEnd(th) {
			return true
		}
	}
	return false
}

// Complete reports whether the value is finished and nothing may follow.
func (r *Run) Complete() bool {
	for _, th := range r.threads {
		if th.f.kind != fRoot {
			return false
		}
	}
	return len(r.threads) > 0
}

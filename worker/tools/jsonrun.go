package tools

import (
	"encoding/binary"
	"math"
	"sort"
)

// jsonRun is one generation's state under a jsonMachine.
type jsonRun struct {
	m       *jsonMachine
	threads []thread
	work    int64
	sw      setWalker
	lw      leafWalker
	lex     []lexState
	scratch []thread
}

func newJSONRun(m *jsonMachine) *jsonRun {
	r := &jsonRun{m: m}
	r.sw.m = m
	r.lw.m = m
	r.reset()
	return r
}

func (r *jsonRun) reset() {
	r.threads = r.m.start()
}

// setWalker walks the trie with a set of threads.
type setWalker struct {
	m    *jsonMachine
	lv   [][]thread
	work *int64
	over bool // too many threads
}

func (w *setWalker) init(ts []thread, maxDepth int) {
	if len(w.lv) < maxDepth+2 {
		w.lv = make([][]thread, maxDepth+2)
	}
	w.lv[0] = append(w.lv[0][:0], ts...)
}

func (w *setWalker) step(d int, b byte, _ int32) bool {
	cur := w.lv[d-1]
	nxt := w.lv[d][:0]
	for _, th := range cur {
		nxt = w.m.step(th, b, nxt, w.work)
	}
	nxt = dedupe(nxt)
	w.lv[d] = nxt
	if len(nxt) == 0 {
		return false
	}
	if len(nxt) > w.m.maxThreads {
		w.over = true
		return false
	}
	return true
}

// leafWalker holds the per-depth frames of a key walk.
type leafWalker struct {
	m  *jsonMachine
	st []frame
}

// leafKeyOf returns the cache key of leaf frame f, and the cache to use.
func (m *jsonMachine) leafKeyOf(f *frame) (leafKey, *leafCache) {
	L := int32(m.vi.maxLen) + 1
	clampR := func(v int32) int32 {
		if v < 0 {
			return 0
		}
		if v > L {
			return L
		}
		return v
	}
	k := leafKey{kind: f.kind, ph: f.ph, u8: f.u8, u8lo: f.u8lo, u8hi: f.u8hi, flag: f.flag, ds: f.ds}
	if f.kind == fString {
		s := f.n.str
		k.rmin = clampR(s.minLen - f.cnt)
		k.rmax = clampR(s.maxLen - f.cnt)
		if f.ph >= 2 {
			k.aux = f.aux
		}
		if s.dfa == nil {
			return k, &m.vi.strCache
		}
		k.owner = f.n
		return k, &m.cache
	}
	os := f.n.obj
	k.owner = os
	k.aux = f.aux
	k.rmin = clampR(os.pnMin - f.cnt)
	if os.pnMax == math.MaxInt32 {
		k.rmax = L
	} else {
		k.rmax = clampR(os.pnMax - f.cnt)
	}
	k.seen = f.seen
	if f.seenX != nil {
		k.seenX = seenKey(*f.seenX)
	}
	return k, &m.cache
}

// plainLeaf reports whether leaf frame f treats every plain token alike
// (no pattern, not inside an escape or a character), and how many code
// points may still be added.
func (m *jsonMachine) plainLeaf(f *frame) (int32, bool) {
	if f.ph != 0 || f.u8 != 0 {
		return 0, false
	}
	L := int32(m.vi.maxLen)
	var rmax int32
	if f.kind == fString {
		s := f.n.str
		if s.dfa != nil {
			return 0, false
		}
		rmax = s.maxLen - f.cnt
	} else {
		os := f.n.obj
		if !os.freeKey || os.keyDFA != nil || f.flag&kfSawEsc != 0 {
			return 0, false
		}
		rmax = os.pnMax - f.cnt
	}
	if rmax > L {
		rmax = L
	}
	if rmax < 0 {
		rmax = 0
	}
	return rmax, true
}

// fastLeaf computes a plain leaf's entry: the plain tokens that fit, then
// each special token simulated on its own.
func (r *jsonRun) fastLeaf(start frame, rmax int32) *leafEntry {
	m, vi := r.m, r.m.vi
	inside := append([]uint64(nil), vi.plainUpTo[rmax]...)
	var exits []leafExit
	for i, tok := range vi.special {
		p := vi.pieces[tok]
		f := start
		for k, c := range p {
			var res int
			var payload int32
			if f.kind == fString {
				res, payload = strStep(&f, c, &r.work)
			} else {
				res, payload = m.keyStep(&f, c, &r.work)
			}
			if res == rCont {
				if k == len(p)-1 {
					inside[tok>>6] |= 1 << (uint(tok) & 63)
				}
				continue
			}
			if res == rDone {
				node := vi.specNodes[i][k]
				if n := len(exits); n == 0 || exits[n-1].node != node {
					exits = append(exits, leafExit{node: node, payload: payload})
				}
			}
			break
		}
	}
	// Exits are visited once per node.
	sort.Slice(exits, func(i, j int) bool { return exits[i].node < exits[j].node })
	out := exits[:0]
	for i, e := range exits {
		if i == 0 || e.node != exits[i-1].node {
			out = append(out, e)
		}
	}
	return &leafEntry{inside: inside, exits: out}
}

// plainASCII are the bytes a JSON string takes as themselves.
var plainASCII = func() byteSet {
	var s byteSet
	for b := 0x20; b < 0x80; b++ {
		if b != '"' && b != '\\' {
			s.add(byte(b))
		}
	}
	return s
}()

// plainBytes are the bytes plain string text is made of.
var plainBytes = func() byteSet {
	s := plainASCII
	for b := 0x80; b < 0x100; b++ {
		s.add(byte(b))
	}
	return s
}()

// walkStrLeaf computes a string leaf's entry with a walk of the whole trie,
// keeping only the lexical state per depth.
func (r *jsonRun) walkStrLeaf(start frame, f *fuel) (*leafEntry, error) {
	vi := r.m.vi
	s := start.n.str
	if len(r.lex) < vi.maxLen+2 {
		r.lex = make([]lexState, vi.maxLen+2)
	}
	st := r.lex
	st[0] = start.lexState
	inside := make([]uint64, vi.words)
	var exits []leafExit
	nb, nd, nn, off := vi.nByte, vi.nDepth, vi.nNext, vi.nTokOff
	end := int32(len(nb))
	spent := int64(0)
	dd := s.dfa
	for i := int32(0); i < end; {
		d := nd[i]
		x := st[d-1]
		c := nb[i]
		spent++
		// Fast path: a plain ASCII byte in a pattern-constrained string.
		if dd != nil && x.ph == 0 && x.u8 == 0 && c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && x.cnt < s.maxLen {
			n := x.ds.next
			var ns *dstate
			if n != nil {
				ns = n[dd.classes[c]].Load()
			}
			if ns == nil {
				ns = dd.step(x.ds, c, &r.work)
			}
			if ns.live != dd.all {
				i = nn[i]
				continue
			}
			x.ds = ns
			x.cnt++
			st[d] = x
			if off[i] != off[i+1] {
				vi.setNode(inside, i)
			}
			// Everything below stays in this state: take the subtree whole.
			if nn[i] != i+1 && x.cnt+int32(vi.maxBelow[i]) <= s.maxLen && vi.plainBelow[i] {
				if dd.safeFrom(ns, &plainBytes) || vi.subBytes[i].subsetOf(&plainASCII) && vi.subBytes[i].subsetOf(dd.loopSet(ns)) {
					vi.setSubtree(inside, i)
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
				vi.setNode(inside, i)
			}
			i++
			continue
		}
		if res == rDone {
			exits = append(exits, leafExit{node: i})
		}
		i = nn[i]
		if spent > 4096 {
			if err := f.spend(spent + r.work); err != nil {
				return nil, err
			}
			spent, r.work = 0, 0
		}
	}
	if err := f.spend(spent); err != nil {
		return nil, err
	}
	return &leafEntry{inside: inside, exits: exits}, nil
}

// walkKeyLeaf computes a key leaf's entry with a walk of the whole trie;
// off the known-key trie, a subtree of plain text that keeps the key
// automaton live is taken whole.
func (r *jsonRun) walkKeyLeaf(start frame, f *fuel) (*leafEntry, error) {
	m, vi := r.m, r.m.vi
	os := start.n.obj
	lw := &r.lw
	if len(lw.st) < vi.maxLen+2 {
		lw.st = make([]frame, vi.maxLen+2)
	}
	st := lw.st
	st[0] = start
	inside := make([]uint64, vi.words)
	var exits []leafExit
	nb, nd, nn, off := vi.nByte, vi.nDepth, vi.nNext, vi.nTokOff
	end := int32(len(nb))
	spent := int64(0)
	for i := int32(0); i < end; {
		d := nd[i]
		st[d] = st[d-1]
		x := &st[d]
		res, payload := m.keyStep(x, nb[i], &r.work)
		spent++
		if spent > 4096 {
			if err := f.spend(spent + r.work); err != nil {
				return nil, err
			}
			spent, r.work = 0, 0
		}
		if res == rDone {
			exits = append(exits, leafExit{node: i, payload: payload})
		}
		if res != rCont {
			i = nn[i]
			continue
		}
		if off[i] != off[i+1] {
			vi.setNode(inside, i)
		}
		if x.flag&kfOff != 0 && x.ph == 0 && x.u8 == 0 && nn[i] != i+1 && vi.plainBelow[i] &&
			x.cnt+int32(vi.maxBelow[i]) <= os.pnMax && (os.keyDFA == nil || os.keyDFA.safeFrom(x.ds, &plainBytes)) {
			vi.setSubtree(inside, i)
			i = nn[i]
			continue
		}
		i++
	}
	if err := f.spend(spent); err != nil {
		return nil, err
	}
	return &leafEntry{inside: inside, exits: exits}, nil
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
func (r *jsonRun) leafMask(th thread, dst []uint64, f *fuel) error {
	m := r.m
	vi := m.vi
	key, cache := m.leafKeyOf(&th.f)
	e := cache.get(key)
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
		if err := f.spend(int64(len(vi.special)) + r.work); err != nil {
			return err
		}
		r.work = 0
		e = cache.put(key, e, m.mem)
	}
	orMask(dst, e.inside)
	// Tokens that leave the leaf: finish it, then check the rest of each
	// token against the enclosing frames.
	var lastPayload int32
	var lastTh thread
	lastOK, have := false, false
	base := thread{rest: th.rest}
	for _, ex := range e.exits {
		if !have || ex.payload != lastPayload {
			lastTh, lastOK = m.finish(base, ex.payload)
			lastPayload, have = ex.payload, true
		}
		if !lastOK {
			continue
		}
		vi.setNode(dst, ex.node)
		if vi.nNext[ex.node] == ex.node+1 {
			continue // no longer tokens below
		}
		r.sw.init([]thread{lastTh}, vi.maxLen)
		r.sw.work = &r.work
		if err := vi.walk(ex.node, &r.sw, dst, f); err != nil {
			return err
		}
		if r.sw.over {
			r.sw.over = false
			return errTooManyThreads
		}
	}
	return nil
}

// mask fills dst with the tokens the grammar allows next and reports
// whether it may end here.
func (r *jsonRun) mask(dst []uint64, f *fuel) (eog bool, err error) {
	clearMask(dst)
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
		r.sw.init(r.scratch, vi.maxLen)
		r.sw.work = &r.work
		if err := vi.walk(-1, &r.sw, dst, f); err != nil {
			return false, err
		}
		if r.sw.over {
			r.sw.over = false
			return false, errTooManyThreads
		}
	}
	if err := f.spend(r.work); err != nil {
		return false, err
	}
	r.work = 0
	return eog, nil
}

// accept advances by the bytes of a token; false when no thread survives.
func (r *jsonRun) accept(p []byte, f *fuel) (bool, error) {
	cur := r.threads
	for _, c := range p {
		nxt := make([]thread, 0, len(cur))
		for _, th := range cur {
			nxt = r.m.step(th, c, nxt, &r.work)
		}
		nxt = dedupe(nxt)
		if err := f.spend(int64(len(cur)) + r.work); err != nil {
			return false, err
		}
		r.work = 0
		if len(nxt) == 0 {
			return false, nil
		}
		if len(nxt) > r.m.maxThreads {
			return false, errTooManyThreads
		}
		cur = nxt
	}
	r.threads = cur
	return true, nil
}

// canEnd reports whether the output may end here.
func (r *jsonRun) canEnd() bool {
	for _, th := range r.threads {
		if r.m.canEnd(th) {
			return true
		}
	}
	return false
}

// complete reports whether the value is finished and nothing may follow.
func (r *jsonRun) complete() bool {
	for _, th := range r.threads {
		if th.f.kind != fRoot {
			return false
		}
	}
	return len(r.threads) > 0
}

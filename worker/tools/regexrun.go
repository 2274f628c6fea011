package tools

import (
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// regex_matcher: the whole output must match an RE2 pattern. The lazy DFA
// of the pattern is walked over the token trie; the mask of each DFA state
// is cached (a state is all there is to the context), so a mask after the
// first visit of a state is one copy.

type regexMachine struct {
	d     *automaton.DFA
	vi    *vocab.Index
	cache vocab.LeafCache
	mem   *limit.Meter
}

func newRegexMachine(d *automaton.DFA, vi *vocab.Index, mem *limit.Meter) *regexMachine {
	m := &regexMachine{d: d, vi: vi, mem: mem}
	m.cache.Init(2048)
	return m
}

type regexRun struct {
	m    *regexMachine
	s    *automaton.State
	work int64
	w    dfaWalker
}

func newRegexRun(m *regexMachine) *regexRun {
	r := &regexRun{m: m}
	r.Reset()
	return r
}

func (r *regexRun) Reset() { r.s = r.m.d.Start }

// dfaWalker walks the trie with a DFA state; every component must stay
// live.
type dfaWalker struct {
	d    *automaton.DFA
	st   []*automaton.State
	work *int64
}

func (w *dfaWalker) Step(k int, b byte, _ int32) bool {
	n := w.d.Step(w.st[k-1], b, w.work)
	if !w.d.LiveAll(n) {
		return false
	}
	w.st[k] = n
	return true
}

// maskFor returns the cached (or freshly walked) mask of DFA state s.
func dfaMask(d *automaton.DFA, vi *vocab.Index, cache *vocab.LeafCache, mem *limit.Meter, owner any, s *automaton.State, w *dfaWalker, work *int64, f *limit.Fuel) ([]uint64, error) {
	key := vocab.LeafKey{Owner: owner, DFAState: s}
	if e := cache.Get(key); e != nil {
		return e.Inside, nil
	}
	if len(w.st) < vi.MaxLen+2 {
		w.st = make([]*automaton.State, vi.MaxLen+2)
	}
	w.d, w.work = d, work
	w.st[0] = s
	inside := make([]uint64, vi.Words)
	if err := vi.Walk(-1, w, inside, f); err != nil {
		return nil, err
	}
	if err := f.Spend(*work); err != nil {
		return nil, err
	}
	*work = 0
	e := cache.Put(key, &vocab.LeafEntry{Inside: inside}, mem)
	return e.Inside, nil
}

func (r *regexRun) Mask(dst []uint64, f *limit.Fuel) (bool, error) {
	in, err := dfaMask(r.m.d, r.m.vi, &r.m.cache, r.m.mem, r.m, r.s, &r.w, &r.work, f)
	if err != nil {
		return false, err
	}
	copy(dst, in)
	return r.m.d.AcceptAll(r.s), nil
}

func (r *regexRun) Accept(p []byte, f *limit.Fuel) (bool, error) {
	s := r.s
	for _, c := range p {
		s = r.m.d.Step(s, c, &r.work)
		if !r.m.d.LiveAll(s) {
			return false, nil
		}
	}
	if err := f.Spend(int64(len(p)) + r.work); err != nil {
		return false, err
	}
	r.work = 0
	r.s = s
	return true, nil
}

func (r *regexRun) CanEnd() bool   { return r.m.d.AcceptAll(r.s) }
func (r *regexRun) Complete() bool { return r.m.d.Terminal(r.s) }

// Forced appends to dst the bytes every match from here begins with, at
// most max of them (grammar.Run.Forced for the pattern's automaton).
func (r *regexRun) Forced(max int, dst []byte) []byte {
	d, s := r.m.d, r.s
	var work int64
	for n := 0; n < max; n++ {
		if d.AcceptAll(s) {
			return dst
		}
		var next *automaton.State
		found := -1
		for _, c := range grammar.ProbeOrder {
			t := d.Step(s, c, &work)
			if !d.LiveAll(t) {
				continue
			}
			if found >= 0 {
				return dst
			}
			found, next = int(c), t
		}
		if found < 0 {
			return dst
		}
		dst = append(dst, byte(found))
		s = next
	}
	return dst
}

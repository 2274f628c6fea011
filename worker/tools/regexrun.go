package tools

// regex_matcher: the whole output must match an RE2 pattern. The lazy DFA
// of the pattern is walked over the token trie; the mask of each DFA state
// is cached (a state is all there is to the context), so a mask after the
// first visit of a state is one copy.

type regexMachine struct {
	d     *dfa
	vi    *vocabIndex
	cache leafCache
	mem   *meter
}

func newRegexMachine(d *dfa, vi *vocabIndex, mem *meter) *regexMachine {
	m := &regexMachine{d: d, vi: vi, mem: mem}
	m.cache.init(2048)
	return m
}

type regexRun struct {
	m    *regexMachine
	s    *dstate
	work int64
	w    dfaWalker
}

func newRegexRun(m *regexMachine) *regexRun {
	r := &regexRun{m: m}
	r.reset()
	return r
}

func (r *regexRun) reset() { r.s = r.m.d.start }

// dfaWalker walks the trie with a DFA state; every component must stay
// live.
type dfaWalker struct {
	d    *dfa
	st   []*dstate
	work *int64
}

func (w *dfaWalker) step(k int, b byte, _ int32) bool {
	n := w.d.step(w.st[k-1], b, w.work)
	if !w.d.liveAll(n) {
		return false
	}
	w.st[k] = n
	return true
}

// maskFor returns the cached (or freshly walked) mask of DFA state s.
func dfaMask(d *dfa, vi *vocabIndex, cache *leafCache, mem *meter, owner any, s *dstate, w *dfaWalker, work *int64, f *fuel) ([]uint64, error) {
	key := leafKey{owner: owner, ds: s}
	if e := cache.get(key); e != nil {
		return e.inside, nil
	}
	if len(w.st) < vi.maxLen+2 {
		w.st = make([]*dstate, vi.maxLen+2)
	}
	w.d, w.work = d, work
	w.st[0] = s
	inside := make([]uint64, vi.words)
	if err := vi.walk(-1, w, inside, f); err != nil {
		return nil, err
	}
	if err := f.spend(*work); err != nil {
		return nil, err
	}
	*work = 0
	e := cache.put(key, &leafEntry{inside: inside}, mem)
	return e.inside, nil
}

func (r *regexRun) mask(dst []uint64, f *fuel) (bool, error) {
	in, err := dfaMask(r.m.d, r.m.vi, &r.m.cache, r.m.mem, r.m, r.s, &r.w, &r.work, f)
	if err != nil {
		return false, err
	}
	copy(dst, in)
	return r.m.d.accAll(r.s), nil
}

func (r *regexRun) accept(p []byte, f *fuel) (bool, error) {
	s := r.s
	for _, c := range p {
		s = r.m.d.step(s, c, &r.work)
		if !r.m.d.liveAll(s) {
			return false, nil
		}
	}
	if err := f.spend(int64(len(p)) + r.work); err != nil {
		return false, err
	}
	r.work = 0
	r.s = s
	return true, nil
}

func (r *regexRun) canEnd() bool   { return r.m.d.accAll(r.s) }
func (r *regexRun) complete() bool { return r.m.d.terminal(r.s) }

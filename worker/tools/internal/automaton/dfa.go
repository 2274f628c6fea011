package automaton

import (
	"encoding/binary"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// A lazy byte-level DFA over a regexProgram. States are built on first use
// and cached with their transitions (one slot per byte class); a cap on the
// number of cached states and on their bytes keeps memory bounded: past it,
// new states are built on every visit without being kept (the automaton
// stays correct, it only gets slower, and the caller's step fuel bounds the
// time). A DFA is shared by every run of a compiled tool, so its cache is
// guarded: readers load transitions atomically, and misses are resolved
// under mu.
//
// A state tracks every component of the program at once (the intersection
// of a string's pattern and format, or the patternProperties of an object's
// keys): live has bit i set when component i can still match, acc when it
// matches if the input ends here.

// Context bits of a state (only kept when the program has begin
// assertions).
const (
	ctxStart uint8 = 1 << iota // at the start of the input
	ctxLine                    // just after a '\n'
)

// State is a DFA state: the set of live NFA threads of every component, with
// its cached transitions. States are built lazily and shared by every run.
type State struct {
	sets []int32 // component sets, each sorted and terminated by -1
	ctx  uint8
	// Live has bit i set while component i can still match.
	Live uint64
	// Accept has bit i set when component i matches the input read so far.
	Accept uint64
	// Next holds the cached transitions by byte class; nil for a state
	// that is not cached.
	Next []atomic.Pointer[State]
	// term caches whether no byte leads to a state where all components
	// are live: 0 unknown, 1 no, 2 yes.
	term atomic.Uint32
	size int64
	// loop holds the bytes that lead back to this state (computed once,
	// for cached states).
	loopOnce sync.Once
	loop     ByteSet
	// safe caches whether no path of plain ASCII bytes from here reaches a
	// state where some component is dead: 0 unknown, 1 no, 2 yes.
	safe atomic.Uint32
	// minChars caches MinChars: 0 unknown, else the answer plus one.
	minChars atomic.Uint32
}

// DFA is a lazy DFA over a Program: states are built on first use and
// cached under a cap on states and bytes. It is safe for concurrent use.
type DFA struct {
	prog          *Program
	ncomp         int
	AllComponents uint64 // mask of all components
	// Need are the components that must stay live for safeFrom (all, or
	// for object keys the propertyNames checks).
	MustLive uint64
	// ByteClasses maps each byte to its equivalence class (bytes no
	// instruction tells apart share a class and a transition).
	ByteClasses [256]uint8
	ncls        int

	mu        sync.Mutex
	states    map[string]*State
	maxStates int
	memLimit  int64
	memUsed   int64
	// Start is the state before any input.
	Start *State
	mem   *limit.Meter

	// scratch for closures, guarded by mu
	mark  []uint32
	gen   uint32
	stack []int32
	buf   []int32
	key   []byte
}

// NewDFA builds the DFA of prog with the given caps; memory for cached
// states is also charged to mem (shared with the tool's other structures).
func NewDFA(prog *Program, maxStates int, memLimit int64, mem *limit.Meter) *DFA {
	d := &DFA{
		prog:      prog,
		ncomp:     len(prog.starts),
		states:    make(map[string]*State),
		maxStates: maxStates,
		memLimit:  memLimit,
		mem:       mem,
		mark:      make([]uint32, len(prog.code.insts)),
	}
	if d.ncomp >= 64 {
		d.AllComponents = ^uint64(0)
	} else {
		d.AllComponents = 1<<uint(d.ncomp) - 1
	}
	d.MustLive = d.AllComponents
	// Byte classes: bytes no instruction tells apart share a class. '\n'
	// is always a class of its own (line assertions look at it).
	var cut [257]bool
	cut[0], cut[256] = true, true
	cut['\n'], cut['\n'+1] = true, true
	for _, in := range prog.code.insts {
		if in.op == opByte {
			cut[in.lo] = true
			cut[int(in.hi)+1] = true
		}
	}
	cls := -1
	for b := 0; b < 256; b++ {
		if cut[b] {
			cls++
		}
		d.ByteClasses[b] = uint8(cls)
	}
	d.ncls = cls + 1
	d.mu.Lock()
	ctx := ctxStart | ctxLine
	if !prog.code.hasBegin {
		ctx = 0
	}
	seeds := make([][]int32, d.ncomp)
	for i, s := range prog.starts {
		seeds[i] = []int32{s}
	}
	d.Start = d.build(seeds, ctx, nil)
	d.mu.Unlock()
	return d
}

// closure adds to d.buf every pc reachable from seeds by epsilon moves in
// context ctx, keeping byte, match and pending end-assertion instructions,
// sorted. It returns the number of instructions visited. Caller holds mu.
func (d *DFA) closure(seeds []int32, ctx uint8, endOK bool) int {
	d.gen++
	if d.gen == 0 {
		for i := range d.mark {
			d.mark[i] = 0
		}
		d.gen = 1
	}
	insts := d.prog.code.insts
	co := d.prog.code.coreach
	if ctx&ctxStart == 0 {
		co = d.prog.code.coreachLater
	}
	start := len(d.buf)
	visited := 0
	d.stack = append(d.stack[:0], seeds...)
	for len(d.stack) > 0 {
		pc := d.stack[len(d.stack)-1]
		d.stack = d.stack[:len(d.stack)-1]
		if d.mark[pc] == d.gen || !co[pc] {
			continue
		}
		d.mark[pc] = d.gen
		visited++
		in := &insts[pc]
		switch in.op {
		case opByte, opMatch:
			d.buf = append(d.buf, pc)
		case opNop:
			d.stack = append(d.stack, in.out)
		case opSplit:
			for i := len(in.alt) - 1; i >= 0; i-- {
				d.stack = append(d.stack, in.alt[i])
			}
		case opAssert:
			switch in.arg {
			case assertBeginText:
				if ctx&ctxStart != 0 {
					d.stack = append(d.stack, in.out)
				}
			case assertBeginLine:
				if ctx&(ctxStart|ctxLine) != 0 {
					d.stack = append(d.stack, in.out)
				}
			default:
				if endOK {
					d.stack = append(d.stack, in.out)
				} else {
					d.buf = append(d.buf, pc) // pending until the end or a '\n'
				}
			}
		}
	}
	s := d.buf[start:]
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return visited
}

// build returns the state for the given per-component seeds in context ctx:
// a cached one when it exists, a new cached one while the caps allow, or a
// transient one. Caller holds mu. work, when not nil, gets the
// instructions visited.
func (d *DFA) build(seeds [][]int32, ctx uint8, work *int64) *State {
	if !d.prog.code.hasBegin {
		ctx = 0
	}
	d.buf = d.buf[:0]
	var live uint64
	n := 0
	for i := range seeds {
		before := len(d.buf)
		n += d.closure(seeds[i], ctx, false)
		if len(d.buf) > before {
			live |= 1 << uint(i)
		}
		d.buf = append(d.buf, -1)
	}
	if work != nil {
		*work += int64(n)
	}
	d.key = d.key[:0]
	d.key = append(d.key, ctx)
	for _, pc := range d.buf {
		d.key = binary.LittleEndian.AppendUint32(d.key, uint32(pc))
	}
	if s, ok := d.states[string(d.key)]; ok {
		return s
	}
	s := &State{sets: append([]int32(nil), d.buf...), ctx: ctx, Live: live}
	s.Accept = d.acceptAtEnd(s)
	size := int64(len(s.sets)*4+len(d.key)) + int64(d.ncls)*8 + 128
	if len(d.states) < d.maxStates && d.memUsed+size <= d.memLimit && d.mem.Charge(size) == nil {
		s.Next = make([]atomic.Pointer[State], d.ncls)
		s.size = size
		d.memUsed += size
		d.states[string(d.key)] = s
	}
	return s
}

// acceptAtEnd returns the components of s that match if the input ends
// here. Caller holds mu.
func (d *DFA) acceptAtEnd(s *State) uint64 {
	var acc uint64
	insts := d.prog.code.insts
	comp := 0
	saved := d.buf
	d.buf = nil
	for i := 0; i < len(s.sets); i++ {
		pc := s.sets[i]
		if pc < 0 {
			comp++
			continue
		}
		switch insts[pc].op {
		case opMatch:
			acc |= 1 << uint(comp)
		case opAssert:
			if acc&(1<<uint(comp)) != 0 {
				continue
			}
			d.buf = d.buf[:0]
			d.closure([]int32{insts[pc].out}, s.ctx, true)
			for _, q := range d.buf {
				if insts[q].op == opMatch {
					acc |= 1 << uint(comp)
					break
				}
			}
		}
	}
	d.buf = saved
	return acc
}

// Step returns the state after byte b. work, when not nil, gets the
// instructions visited on a cache miss.
func (d *DFA) Step(s *State, b byte, work *int64) *State {
	cls := d.ByteClasses[b]
	if s.Next != nil {
		if n := s.Next[cls].Load(); n != nil {
			return n
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.Next != nil {
		if n := s.Next[cls].Load(); n != nil {
			return n
		}
	}
	insts := d.prog.code.insts
	seeds := make([][]int32, d.ncomp)
	comp := 0
	var pend []int32
	for i := 0; i < len(s.sets); i++ {
		pc := s.sets[i]
		if pc < 0 {
			comp++
			continue
		}
		in := &insts[pc]
		switch in.op {
		case opByte:
			if in.lo <= b && b <= in.hi {
				seeds[comp] = append(seeds[comp], in.out)
			}
		case opAssert:
			if b == '\n' && in.arg == assertEndLine {
				pend = append(pend[:0], in.out)
				// Follow the line end, then consume the '\n'.
				saved := d.buf
				d.buf = nil
				d.closure(pend, s.ctx, false)
				for _, q := range d.buf {
					if qi := &insts[q]; qi.op == opByte && qi.lo <= b && b <= qi.hi {
						seeds[comp] = append(seeds[comp], qi.out)
					}
				}
				d.buf = saved
			}
		}
	}
	var ctx uint8
	if b == '\n' {
		ctx = ctxLine
	}
	n := d.build(seeds, ctx, work)
	if work != nil {
		*work += int64(len(s.sets))
	}
	if s.Next != nil {
		s.Next[cls].Store(n)
	}
	return n
}

// LoopSet returns the bytes that keep s in s (empty for states that are
// not cached).
func (d *DFA) LoopSet(s *State) *ByteSet {
	if s.Next == nil {
		return &s.loop
	}
	s.loopOnce.Do(func() {
		for b := 0; b < 256; b++ {
			if d.Step(s, byte(b), nil) == s {
				s.loop.Add(byte(b))
			}
		}
	})
	return &s.loop
}

// maxSafeExplore bounds the states safeFrom explores.
const maxSafeExplore = 512

// SafeFrom reports whether every path of bytes in set from s keeps every
// component live (so a trie walk may take such a subtree whole). Unknown
// (too many states, or states that are not cached) counts as no.
func (d *DFA) SafeFrom(s *State, set *ByteSet) bool {
	switch s.safe.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	if s.Next == nil {
		return false
	}
	// One representative byte per class.
	var reps []byte
	var seenCls [256]bool
	for b := 0; b < 256; b++ {
		if set.has(byte(b)) && !seenCls[d.ByteClasses[b]] {
			seenCls[d.ByteClasses[b]] = true
			reps = append(reps, byte(b))
		}
	}
	visited := map[*State]bool{s: true}
	queue := []*State{s}
	ok := true
	for len(queue) > 0 && ok {
		x := queue[0]
		queue = queue[1:]
		for _, b := range reps {
			n := d.Step(x, b, nil)
			if n.Live&d.MustLive != d.MustLive || n.Next == nil || n.safe.Load() == 1 {
				ok = false
				break
			}
			if !visited[n] {
				if len(visited) >= maxSafeExplore {
					ok = false
					break
				}
				visited[n] = true
				queue = append(queue, n)
			}
		}
	}
	if ok {
		for x := range visited {
			x.safe.Store(2)
		}
		return true
	}
	s.safe.Store(1)
	return false
}

// Terminal reports whether no byte leads from s to a state where every
// component is live: the input cannot usefully go on.
func (d *DFA) Terminal(s *State) bool {
	switch s.term.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	res := uint32(2)
	for b := 0; b < 256; b++ {
		if d.Step(s, byte(b), nil).Live == d.AllComponents {
			res = 1
			break
		}
	}
	s.term.Store(res)
	return res == 2
}

// MinCharsCap bounds MinChars: a string with at least this many
// characters left never needs asking.
const MinCharsCap = 8

// minCharsStates bounds the states one MinChars explores.
const minCharsStates = 4096

// MinChars returns a lower bound on the characters (bytes that do not
// continue a UTF-8 sequence) that must still be read from s, through
// states where every component is live, before every component accepts:
// 0 when s accepts, at most MinCharsCap. A string whose maxLength leaves
// fewer characters than this cannot end, so a walk that stops there is a
// dead end (a pattern such as [a-z]+\.[a-z]+ under a maxLength that the
// first part has used up). The bound is 0, which refuses nothing, where
// the search would visit more than minCharsStates states. Cached per
// state.
func (d *DFA) MinChars(s *State) int {
	if v := s.minChars.Load(); v != 0 {
		return int(v - 1)
	}
	res := d.minChars(s)
	s.minChars.Store(uint32(res) + 1)
	return res
}

// minChars is MinChars without the cache: a breadth-first search in which
// a UTF-8 continuation byte costs nothing and any other byte one
// character (any byte sequence is followed, so the bound is a lower one).
func (d *DFA) minChars(s *State) int {
	if d.AcceptAll(s) {
		return 0
	}
	seen := map[*State]bool{s: true}
	level := []*State{s}
	for dist := 0; dist < MinCharsCap; dist++ {
		// The states dist characters away, then those one more.
		for i := 0; i < len(level); i++ { // continuation bytes: same distance
			for b := 0x80; b < 0xC0; b++ {
				n := d.Step(level[i], byte(b), nil)
				if n.Live != d.AllComponents || seen[n] {
					continue
				}
				if d.AcceptAll(n) {
					return dist
				}
				if seen[n] = true; len(seen) > minCharsStates {
					return 0
				}
				level = append(level, n)
			}
		}
		var next []*State
		for _, x := range level {
			for b := 0; b < 256; b++ {
				if b == 0x80 {
					b = 0xBF
					continue
				}
				n := d.Step(x, byte(b), nil)
				if n.Live != d.AllComponents || seen[n] {
					continue
				}
				if d.AcceptAll(n) {
					return dist + 1
				}
				if seen[n] = true; len(seen) > minCharsStates {
					return 0
				}
				next = append(next, n)
			}
		}
		if len(next) == 0 {
			return MinCharsCap // nothing reachable accepts: as far as it goes
		}
		level = next
	}
	return MinCharsCap
}

// LiveAll reports whether every component of s can still match.
func (d *DFA) LiveAll(s *State) bool { return s.Live == d.AllComponents }

// AcceptAll reports whether every component of s matches at the end.
func (d *DFA) AcceptAll(s *State) bool { return s.Accept == d.AllComponents }

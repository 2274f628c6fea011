package grammar

import (
	"math"
	"math/bits"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// The JSON grammar at run time: a pushdown automaton over bytes, run as a
// set of threads (one per anyOf branch still alive). A thread is its top
// frame, held by value and changed in place, over an immutable linked
// stack of the frames below it, shared between threads; a byte changes the
// top frame, pushes a child (a value, a key) or pops a finished one.
// Threads that end up identical are merged.

// Frame kinds.
const (
	fRoot   uint8 = iota // bottom of the stack; ph 1 once the value is done
	fValue               // before a value of node n (whitespace allowed)
	fString              // inside a string value (after the opening quote)
	fKey                 // inside an object key (after the opening quote)
	fNumber              // inside a number
	fObject              // inside an object
	fArray               // inside an array
	fLit                 // inside a literal (enum, const, true, null, ...)
)

// Object phases.
const (
	oOpen     uint8 = iota // after '{'
	oNeedKey               // after ','
	oKeyWait               // a key frame is on top
	oColon                 // after a key, before ':'
	oValWait               // a value is on top
	oAfterVal              // after a value
)

// Array phases.
const (
	aOpen      uint8 = iota // after '['
	aNeedItem               // after ','
	aItemWait               // an item is on top
	aAfterItem              // after an item
)

// Key frame flags.
const (
	kfSawEsc uint8 = 1 << iota // an escape was read on the known-key trie
	kfOff                      // off the known-key trie
	// lfUniq marks a literal (or the value frame before it) whose seen
	// field lists the values a uniqueItems array already holds.
	lfUniq
	// afContains marks an array frame whose item on top is counted by
	// "contains".
	afContains
	// uqItem marks an item of a UniqueScalars array (and the string,
	// number or literal frame it becomes): a string or number keeps its
	// text in txt so that the array can compare it with earlier items.
	uqItem
	// nfNeg marks a number frame whose number is negative.
	nfNeg
	// nfIn marks a number frame on the rational path whose every
	// completion satisfies the spec (NumSpec.within): the following bytes
	// need no check, and its text is dropped (kept only for uniqueItems),
	// so that prefixes such as "5" and "6" under "minimum": 0 become one
	// state and a trie walk shares what it learns below them.
	nfIn
)

// Leaf step results.
const (
	rDead = iota
	rCont
	rDone     // the byte ends the frame (consumed)
	rDoneNext // the frame ended before the byte (re-read it above)
)

// LexState is the part of a frame that strings, keys and numbers change on
// every byte; a string walk keeps only this per trie depth.
type LexState struct {
	ds          *automaton.State
	cnt         int32 // code points, items or properties so far
	aux         int32 // trie node, property, hex accumulator
	ph          uint8
	UTF8Pending uint8 // continuation bytes still expected
	UTF8Lo      uint8 // range of the next continuation byte
	UTF8Hi      uint8
}

type frame struct {
	n *Node
	LexState
	kind  uint8
	ws    uint8 // whitespace run length
	flag  uint8
	seen  uint64
	seenX *[]uint64 // seen properties when an object has more than 64
	txt   string    // text of a constrained number
}

type stackNode struct {
	f    frame
	next *stackNode
}

type thread struct {
	f    frame
	rest *stackNode
}

// Machine is a compiled schema, shared by every run.
type Machine struct {
	root  *Node
	vi    *vocab.Index
	cache vocab.LeafCache
	// Meter holds the bytes of the machine's caches and lazy automata.
	Meter      *limit.Meter
	maxWS      uint8
	maxThreads int
	allowed    map[*ObjSpec][]uint64 // props whose value can be valid
	quotes     quotePaths            // uniqueItems: the text before a closing quote
}

// Layout says how a machine writes what the schema leaves open: the
// whitespace between JSON tokens, and how long strings and property names
// the schema does not bound may grow. The zero Layout is compact output
// with no cap.
type Layout struct {
	// MaxSpace bounds a run of whitespace between two JSON tokens, in
	// bytes (at most 255); 0, the default, allows none (compact output:
	// with a small model, whitespace is otherwise a fifth to a half of the
	// output). PrettySpace allows a newline and indentation. One space
	// (leadSpace) may come before the top-level value in any layout.
	MaxSpace int
	// MaxStringLen caps, in code points, strings and additional property
	// names whose schema sets no maxLength (nor a pattern or format, whose
	// automaton decides their length); a minLength above it wins. 0, the
	// default, leaves them uncapped.
	MaxStringLen int32
}

// leadSpace bounds the spaces before the top-level value, whatever the
// layout: tokenizers that put a space before the first word (SentencePiece's
// "▁{") spend no token on it, and refusing it would push the model off
// its likeliest first token. One space is that; more, or a newline, is a
// token spent on nothing (a small model took four when it could).
const leadSpace = 1

// PrettySpace is Layout.MaxSpace for pretty-printed output: a newline and
// indentation to some thirty levels.
const PrettySpace = 64

// IsJSONSpace reports whether c is JSON whitespace.
func IsJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// NewMachine returns the machine of the node graph all rooted at root, over
// the vocabulary vi, written as layout says; cached masks are charged to
// mem and a run follows at most maxThreads parser threads. The nodes'
// specs are finished here (the digits numbers may take and what follows
// from them prepared, the layout's string cap applied), so the graph
// belongs to the machine from then on.
func NewMachine(root *Node, all []*Node, vi *vocab.Index, mem *limit.Meter, maxThreads int, layout Layout) *Machine {
	ws := layout.MaxSpace
	if ws < 0 {
		ws = 0
	}
	if ws > math.MaxUint8 {
		ws = math.MaxUint8
	}
	m := &Machine{root: root, vi: vi, Meter: mem, maxWS: uint8(ws), maxThreads: maxThreads,
		allowed: map[*ObjSpec][]uint64{}}
	m.cache.Init(4096)
	capLen := func(min, max int32) int32 {
		if c := layout.MaxStringLen; c > 0 && max == math.MaxInt32 {
			return maxInt32(c, min)
		}
		return max
	}
	for _, n := range all {
		switch n.Kind {
		case KindNumber:
			n.Number.prepare()
		case KindString:
			if n.String.DFA == nil {
				n.String.MaxLen = capLen(n.String.MinLen, n.String.MaxLen)
			}
		case KindObject:
			os := n.Object
			if os.KeyDFA == nil {
				os.MaxKeyLen = capLen(os.MinKeyLen, os.MaxKeyLen)
			}
			for _, p := range os.Props {
				if int64(utf8.RuneCountInString(p.Name)) > int64(os.MaxKeyLen) {
					os.longKeys = true
				}
			}
			a := make([]uint64, os.Words)
			for i, p := range os.Props {
				if p.Node.Kind != KindNever {
					a[i>>6] |= 1 << (uint(i) & 63)
				}
			}
			m.allowed[os] = a
		}
	}
	return m
}

func maxInt32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// start returns the initial threads.
func (m *Machine) start() []thread {
	return []thread{{f: frame{kind: fValue, n: m.root}, rest: &stackNode{f: frame{kind: fRoot}}}}
}

// push puts child on top of th.
func push(th thread, child frame) thread {
	return thread{f: child, rest: &stackNode{f: th.f, next: th.rest}}
}

// seenHas reports whether property i of the object frame f was seen.
func (f *frame) seenHas(i int) bool {
	if f.seenX != nil {
		return (*f.seenX)[i>>6]&(1<<(uint(i)&63)) != 0
	}
	return i < 64 && f.seen&(1<<uint(i)) != 0
}

func (f *frame) seenSet(i int, nprops int) {
	if nprops <= 64 {
		f.seen |= 1 << uint(i)
		return
	}
	var cp []uint64
	if f.seenX != nil {
		cp = append([]uint64(nil), (*f.seenX)...)
	} else {
		cp = make([]uint64, (nprops+63)/64)
	}
	cp[i>>6] |= 1 << (uint(i) & 63)
	f.seenX = &cp
}

// missingRequired counts required properties not yet seen.
func (f *frame) missingRequired(os *ObjSpec) int {
	n := 0
	for w, r := range os.Required {
		var s uint64
		if f.seenX != nil {
			s = (*f.seenX)[w]
		} else if w == 0 {
			s = f.seen
		}
		n += bits.OnesCount64(r &^ s)
	}
	return n
}

// canAddKey reports whether the object frame f may still take a property.
func (m *Machine) canAddKey(f *frame) bool {
	os := f.n.Object
	if f.cnt >= os.MaxProps {
		return false
	}
	if os.FreeKey {
		return true
	}
	return m.unseenAllowed(f, m.allowed[os])
}

// unseenAllowed reports whether set (a prop bitset) holds an allowed
// property that object or key frame f has not seen.
func (m *Machine) unseenAllowed(f *frame, set []uint64) bool {
	allowed := m.allowed[f.n.Object]
	for w := range set {
		s := f.seen
		if f.seenX != nil {
			s = (*f.seenX)[w]
		} else if w > 0 {
			s = 0
		}
		if set[w]&allowed[w]&^s != 0 {
			return true
		}
	}
	return false
}

// canClose reports whether the object frame f may end now.
func (m *Machine) canClose(f *frame) bool {
	os := f.n.Object
	if f.cnt < os.MinProps || f.missingRequired(os) > 0 {
		return false
	}
	for _, d := range os.Dependencies {
		if f.seenHas(d.If) {
			for _, t := range d.Then {
				if !f.seenHas(t) {
					return false
				}
			}
		}
	}
	return true
}

// valueNode returns the node of the value after the key recorded in aux.
func valueNode(os *ObjSpec, aux int32) *Node {
	if aux >= 0 {
		return os.Props[aux].Node
	}
	return os.PatternCombos[-(aux + 1)]
}

// finish pops th's top frame, which produced payload, into its parent.
func (m *Machine) finish(th thread, payload int32) (thread, bool) {
	if th.rest == nil {
		return th, false
	}
	p := th.rest.f
	th.rest = th.rest.next
	switch p.kind {
	case fRoot:
		p.ph = 1
	case fObject:
		os := p.n.Object
		switch p.ph {
		case oKeyWait:
			if payload >= 0 {
				i := int(payload)
				if p.seenHas(i) || os.Props[i].Node.Kind == KindNever {
					return th, false
				}
				p.seenSet(i, len(os.Props))
			}
			p.aux = payload
			p.cnt++
			if p.cnt > os.MaxProps || int32(p.missingRequired(os)) > os.MaxProps-p.cnt {
				return th, false
			}
			p.ph = oColon
		case oValWait:
			p.ph = oAfterVal
		default:
			return th, false
		}
	case fArray:
		as := p.n.Array
		if as.UniqueScalars && th.f.flag&uqItem != 0 {
			if k := itemKey(&th.f, payload); k != "" {
				if uniqueHas(p.txt, k) {
					return th, false
				}
				p.txt = uniqueAdd(p.txt, k)
			}
		}
		if p.flag&afContains != 0 {
			p.flag &^= afContains
			if p.aux < as.MinContains {
				p.aux++
			}
		}
		if as.Unique {
			item := as.ItemNode(p.cnt - 1)
			if ids, ok := as.ValueIDs[item]; ok && payload >= 0 && int(payload) < len(ids) {
				bit := uint64(1) << uint(ids[payload])
				if p.seen&bit != 0 {
					return th, false
				}
				p.seen |= bit
			}
		}
		p.ph = aAfterItem
	default:
		return th, false
	}
	p.ws = 0
	th.f = p
	return th, true
}

// step feeds byte c to th and appends the resulting threads to out.
func (m *Machine) step(th thread, c byte, out []thread, work *int64) []thread {
	for {
		f := &th.f
		switch f.kind {
		case fRoot:
			return out
		case fValue:
			if IsJSONSpace(c) {
				max := m.maxWS
				if th.rest != nil && th.rest.f.kind == fRoot && max < leadSpace && c == ' ' {
					max = leadSpace
				}
				if f.ws >= max {
					return out
				}
				f.ws++
				return append(out, th)
			}
			return m.dispatch(th, f.n, c, out, work)
		case fString:
			res, payload := strStep(f, c, work)
			return m.leafResult(th, res, payload, out)
		case fKey:
			res, payload := m.keyStep(f, c, work)
			return m.leafResult(th, res, payload, out)
		case fNumber:
			res := numStep(f, c)
			if res == rDoneNext {
				var ok bool
				if th, ok = m.finish(th, 0); !ok {
					return out
				}
				continue
			}
			if res == rCont {
				return append(out, th)
			}
			return out
		case fLit:
			res, payload := litStep(f, c)
			switch res {
			case rCont:
				return append(out, th)
			case rDone:
				if th, ok := m.finish(th, payload); ok {
					return append(out, th)
				}
				return out
			case rDoneNext:
				var ok bool
				if th, ok = m.finish(th, payload); !ok {
					return out
				}
				continue
			}
			return out
		case fObject:
			return m.objStep(th, c, out)
		case fArray:
			return m.arrStep(th, c, out, work)
		}
		return out
	}
}

func (m *Machine) leafResult(th thread, res int, payload int32, out []thread) []thread {
	switch res {
	case rCont:
		return append(out, th)
	case rDone:
		if th, ok := m.finish(th, payload); ok {
			return append(out, th)
		}
	}
	return out
}

// dispatch starts a value of node n on its first byte c.
func (m *Machine) dispatch(th thread, n *Node, c byte, out []thread, work *int64) []thread {
	if !n.firstHas(c) {
		return out
	}
	switch n.Kind {
	case KindAlt:
		for _, a := range n.Alts {
			if a.firstHas(c) {
				out = m.dispatch(th, a, c, out, work)
			}
		}
		return out
	case KindString:
		th.f = frame{kind: fString, n: n, flag: th.f.flag & uqItem}
		if n.String.DFA != nil {
			th.f.ds = n.String.DFA.Start
		}
		return append(out, th)
	case KindObject:
		th.f = frame{kind: fObject, n: n}
		th.f.ph = oOpen
		return append(out, th)
	case KindArray:
		th.f = frame{kind: fArray, n: n}
		th.f.ph = aOpen
		return append(out, th)
	case KindNumber:
		th.f = frame{kind: fNumber, n: n, flag: th.f.flag & uqItem}
		return m.step(th, c, out, work)
	case KindLiteral:
		th.f = frame{kind: fLit, n: n, seen: th.f.seen, flag: th.f.flag & (lfUniq | uqItem)}
		if th.f.flag&uqItem != 0 && n.Literal.Under != nil && th.rest != nil && th.rest.f.kind == fArray {
			// Values the array already holds are avoided from the first
			// byte on, as for an array of literals.
			for i := range n.Literal.Values {
				if k := itemKey(&frame{kind: fLit, n: n}, int32(i)); k != "" && uniqueHas(th.rest.f.txt, k) {
					th.f.seen |= 1 << uint(i)
				}
			}
			th.f.flag |= lfUniq
		}
		return m.step(th, c, out, work)
	}
	return out
}

// objStep feeds c to an object frame.
func (m *Machine) objStep(th thread, c byte, out []thread) []thread {
	f := &th.f
	os := f.n.Object
	if IsJSONSpace(c) && f.ph != oKeyWait && f.ph != oValWait {
		if f.ws >= m.maxWS {
			return out
		}
		f.ws++
		return append(out, th)
	}
	f.ws = 0
	switch f.ph {
	case oOpen, oNeedKey:
		if c == '}' && f.ph == oOpen {
			if !m.canClose(f) {
				return out
			}
			if th, ok := m.finish(th, 0); ok {
				return append(out, th)
			}
			return out
		}
		if c != '"' || !m.canAddKey(f) {
			return out
		}
		f.ph = oKeyWait
		k := frame{kind: fKey, n: f.n}
		if os.KeyDFA != nil {
			k.ds = os.KeyDFA.Start
		}
		if !os.FreeKey {
			k.seen, k.seenX = f.seen, f.seenX
		}
		return append(out, push(th, k))
	case oColon:
		if c != ':' {
			return out
		}
		vn := valueNode(os, f.aux)
		if vn.Kind == KindNever {
			return out
		}
		f.ph = oValWait
		return append(out, push(th, frame{kind: fValue, n: vn}))
	case oAfterVal:
		switch c {
		case ',':
			if !m.canAddKey(f) {
				return out
			}
			f.ph = oNeedKey
			return append(out, th)
		case '}':
			if !m.canClose(f) {
				return out
			}
			if th, ok := m.finish(th, 0); ok {
				return append(out, th)
			}
		}
	}
	return out
}

// arrStep feeds c to an array frame and appends the resulting threads
// (two when an item may or may not be one that "contains" counts).
func (m *Machine) arrStep(th thread, c byte, out []thread, work *int64) []thread {
	f := &th.f
	as := f.n.Array
	if IsJSONSpace(c) {
		if f.ws >= m.maxWS {
			return out
		}
		f.ws++
		return append(out, th)
	}
	f.ws = 0
	switch f.ph {
	case aOpen, aNeedItem:
		if c == ']' && f.ph == aOpen {
			if f.cnt < as.MinItems || f.aux < as.MinContains {
				return out
			}
			if t, ok := m.finish(th, 0); ok {
				return append(out, t)
			}
			return out
		}
		if f.cnt >= as.MaxItems {
			return out
		}
		item := as.ItemNode(f.cnt)
		f.cnt++
		f.ph = aItemWait
		// The item as one that "contains" counts, while more are needed.
		if f.aux < as.MinContains {
			if cn := as.containsNode(f.cnt - 1); cn.Kind != KindNever && cn.firstHas(c) {
				tc := th
				tc.f.flag |= afContains
				out = m.step(push(tc, frame{kind: fValue, n: cn}), c, out, work)
			}
			// Without counting it, enough items must remain.
			if as.MaxItems-f.cnt < as.MinContains-f.aux {
				return out
			}
		}
		if item.Kind == KindNever || !item.firstHas(c) {
			return out
		}
		child := frame{kind: fValue, n: item}
		if as.UniqueScalars {
			child.flag |= uqItem
		}
		if as.Unique {
			if ids, ok := as.ValueIDs[item]; ok && item.Kind == KindLiteral {
				for i, id := range ids {
					if f.seen&(1<<uint(id)) != 0 {
						child.seen |= 1 << uint(i)
					}
				}
				child.flag |= lfUniq
			}
		}
		return m.step(push(th, child), c, out, work)
	case aAfterItem:
		switch c {
		case ',':
			if f.cnt >= as.MaxItems || as.ItemNode(f.cnt).Kind == KindNever {
				return out
			}
			f.ph = aNeedItem
			return append(out, th)
		case ']':
			if f.cnt < as.MinItems || f.aux < as.MinContains {
				return out
			}
			if t, ok := m.finish(th, 0); ok {
				return append(out, t)
			}
		}
	}
	return out
}

// UTF8Lead sets the continuation state after lead byte c; false when c
// cannot start a UTF-8 sequence.
func UTF8Lead(f *LexState, c byte) bool {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 1, 0x80, 0xBF
	case c == 0xE0:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 2, 0xA0, 0xBF
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 2, 0x80, 0xBF
	case c == 0xED:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 2, 0x80, 0x9F
	case c == 0xF0:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 3, 0x80, 0xBF
	case c == 0xF4:
		f.UTF8Pending, f.UTF8Lo, f.UTF8Hi = 3, 0x80, 0x8F
	default:
		return false
	}
	return true
}

// HexValue returns the value of the hex digit c, or -1.
func HexValue(c byte) int32 {
	switch {
	case c >= '0' && c <= '9':
		return int32(c - '0')
	case c >= 'a' && c <= 'f':
		return int32(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int32(c-'A') + 10
	}
	return -1
}

// escByte returns the byte a short escape \c stands for.
func escByte(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// escapeLive reports whether some short escape can follow in a string of
// spec s with cnt characters read, its pattern in state ds: the character
// it stands for keeps the pattern live, with room left (lenRoom) for what
// the pattern still needs.
func escapeLive(s *StrSpec, cnt int32, ds *automaton.State) bool {
	d := s.DFA
	for _, b := range []byte{'"', '\\', '/', '\b', '\f', '\n', '\r', '\t'} {
		if next := d.Step(ds, b, nil); d.LiveAll(next) && lenRoom(s, cnt+1, next) {
			return true
		}
	}
	return false
}

// dfaByte steps ds by b; false when a component dies.
func dfaByte(d *automaton.DFA, ds **automaton.State, b byte, work *int64) bool {
	*ds = d.Step(*ds, b, work)
	return d.LiveAll(*ds)
}

// dfaBytes steps ds by the bytes of b; false when a component dies.
func dfaBytes(d *automaton.DFA, ds **automaton.State, b []byte, work *int64) bool {
	for _, x := range b {
		*ds = d.Step(*ds, x, work)
		if !d.LiveAll(*ds) {
			return false
		}
	}
	return true
}

// lenRoom reports whether a string of spec s with cnt characters read,
// its pattern in state ds, can still end within its maxLength: the
// characters the pattern needs at least (automaton.DFA.MinChars) fit in
// what is left. Without it a pattern such as [a-z]+\.[a-z]+ could spend
// the whole length on its first part and reach a dead end.
func lenRoom(s *StrSpec, cnt int32, ds *automaton.State) bool {
	left := s.MaxLen - cnt
	return left >= automaton.MinCharsCap || int32(s.DFA.MinChars(ds)) <= left
}

// lenSure reports whether no string of spec s with cnt characters read
// can meet lenRoom's limit within more characters: lenRoom holds all the
// way, and a walk may skip it.
func lenSure(s *StrSpec, cnt, more int32) bool {
	return s.DFA == nil || s.MaxLen-cnt-more >= automaton.MinCharsCap
}

// strStep feeds c to a string-value frame.
func strStep(f *frame, c byte, work *int64) (int, int32) {
	res, payload := strLex(&f.LexState, f.n.String, c, work)
	if res == rCont && f.flag&uqItem != 0 {
		f.txt += string([]byte{c})
	}
	return res, payload
}

// strLex feeds c to the lexical state of a string with spec s.
func strLex(f *LexState, s *StrSpec, c byte, work *int64) (int, int32) {
	if f.UTF8Pending > 0 {
		if c < f.UTF8Lo || c > f.UTF8Hi {
			return rDead, 0
		}
		f.UTF8Pending--
		f.UTF8Lo, f.UTF8Hi = 0x80, 0xBF
		if s.DFA != nil && (!dfaByte(s.DFA, &f.ds, c, work) || !lenRoom(s, f.cnt, f.ds)) {
			return rDead, 0
		}
		return rCont, 0
	}
	switch f.ph {
	case 0:
		switch {
		case c == '"':
			if f.cnt < s.MinLen || s.DFA != nil && !s.DFA.AcceptAll(f.ds) {
				return rDead, 0
			}
			return rDone, 0
		case c == '\\':
			if f.cnt >= s.MaxLen || s.DFA != nil && !escapeLive(s, f.cnt, f.ds) {
				return rDead, 0
			}
			f.ph = 1
			return rCont, 0
		case c < 0x20:
			return rDead, 0
		case c >= 0x80 && !UTF8Lead(f, c):
			return rDead, 0
		}
		if f.cnt >= s.MaxLen {
			return rDead, 0
		}
		f.cnt++
		if s.DFA != nil && (!dfaByte(s.DFA, &f.ds, c, work) || !lenRoom(s, f.cnt, f.ds)) {
			return rDead, 0
		}
		return rCont, 0
	case 1:
		if c == 'u' {
			if s.DFA != nil {
				// \u in a pattern-constrained string could run into a
				// dead end at its last digit; such strings write characters
				// as they are.
				return rDead, 0
			}
			f.ph, f.aux = 2, 0
			return rCont, 0
		}
		d, ok := escByte(c)
		if !ok {
			return rDead, 0
		}
		f.ph = 0
		f.cnt++
		if s.DFA != nil && (!dfaByte(s.DFA, &f.ds, d, work) || !lenRoom(s, f.cnt, f.ds)) {
			return rDead, 0
		}
		return rCont, 0
	default: // 2..5: hex digits of \u
		v := HexValue(c)
		if v < 0 {
			return rDead, 0
		}
		f.aux = f.aux<<4 | v
		if f.ph == 3 && f.aux >= 0xD8 && f.aux <= 0xDF {
			return rDead, 0 // no surrogates: one escape is one code point
		}
		if f.ph < 5 {
			f.ph++
			return rCont, 0
		}
		f.ph = 0
		f.cnt++
		if s.DFA != nil {
			var buf [4]byte
			n := encodeRune(buf[:], f.aux)
			if !dfaBytes(s.DFA, &f.ds, buf[:n], work) || !lenRoom(s, f.cnt, f.ds) {
				return rDead, 0
			}
		}
		f.aux = 0
		return rCont, 0
	}
}

// encodeRune writes the UTF-8 of r (no surrogates) and returns its length.
func encodeRune(p []byte, r int32) int {
	switch {
	case r < 0x80:
		p[0] = byte(r)
		return 1
	case r < 0x800:
		p[0] = 0xC0 | byte(r>>6)
		p[1] = 0x80 | byte(r)&0x3F
		return 2
	default:
		p[0] = 0xE0 | byte(r>>12)
		p[1] = 0x80 | byte(r>>6)&0x3F
		p[2] = 0x80 | byte(r)&0x3F
		return 3
	}
}

// keyStep feeds c to an object-key frame.
func (m *Machine) keyStep(f *frame, c byte, work *int64) (int, int32) {
	os := f.n.Object
	t := os.Keys
	// On the trie, follow the canonical bytes of the known keys (escapes
	// included); a '"' outside an escape ends the key.
	if f.flag&kfOff == 0 && f.UTF8Pending == 0 && f.ph == 0 && c == '"' {
		return m.keyEnd(f)
	}
	if f.flag&kfOff != 0 && f.UTF8Pending == 0 && c == '"' {
		return m.keyEnd(f)
	}
	// UTF-8 and escape state, wherever we are.
	if f.UTF8Pending > 0 {
		if c < f.UTF8Lo || c > f.UTF8Hi {
			return rDead, 0
		}
		f.UTF8Pending--
		f.UTF8Lo, f.UTF8Hi = 0x80, 0xBF
	} else {
		switch f.ph {
		case 0:
			switch {
			case c == '\\':
				if f.flag&kfOff != 0 {
					return rDead, 0 // additional keys are written without escapes
				}
				f.ph = 1
				f.flag |= kfSawEsc
			case c < 0x20:
				return rDead, 0
			case c >= 0x80 && !UTF8Lead(&f.LexState, c):
				return rDead, 0
			default:
				f.cnt++
			}
		case 1:
			if c == 'u' {
				f.ph = 2
			} else {
				f.ph = 0
				f.cnt++
			}
		default:
			if HexValue(c) < 0 {
				return rDead, 0
			}
			if f.ph < 5 {
				f.ph++
			} else {
				f.ph = 0
				f.cnt++
			}
		}
	}
	if os.KeyDFA != nil && f.ds != nil {
		f.ds = os.KeyDFA.Step(f.ds, c, work)
	}
	onTrie := false
	if f.flag&kfOff == 0 {
		if nx := t.Child(f.aux, c); nx >= 0 {
			f.aux = nx
			onTrie = true
			if !os.FreeKey && !m.unseenAllowed(f, os.KeysUnder[int(nx)*os.Words:int(nx+1)*os.Words]) {
				onTrie = false
			}
		} else {
			f.flag |= kfOff
			f.aux = -1
		}
	}
	if onTrie || m.additionalLive(f) {
		return rCont, 0
	}
	return rDead, 0
}

// additionalLive reports whether the key read so far can still become an
// allowed additional key.
func (m *Machine) additionalLive(f *frame) bool {
	os := f.n.Object
	if !os.FreeKey || f.flag&kfSawEsc != 0 || f.cnt > os.MaxKeyLen {
		return false
	}
	if os.KeyDFA != nil {
		// propertyNames components (after the patterns) must stay live.
		need := os.KeyDFA.AllComponents &^ (uint64(1)<<uint(os.NumPatterns) - 1)
		if f.ds.Live&need != need {
			return false
		}
	}
	return true
}

// keyEnd handles the closing quote of a key.
func (m *Machine) keyEnd(f *frame) (int, int32) {
	os := f.n.Object
	if f.flag&kfOff == 0 {
		if v := os.Keys.Nodes[f.aux].Value; v >= 0 {
			if os.Props[v].Node.Kind == KindNever {
				return rDead, 0
			}
			return rDone, v
		}
	}
	if !m.additionalLive(f) || f.cnt < os.MinKeyLen || f.ph != 0 || f.UTF8Pending != 0 {
		return rDead, 0
	}
	mask := 0
	if os.KeyDFA != nil {
		need := os.KeyDFA.AllComponents &^ (uint64(1)<<uint(os.NumPatterns) - 1)
		if f.ds.Accept&need != need {
			return rDead, 0
		}
		mask = int(f.ds.Accept & (uint64(1)<<uint(os.NumPatterns) - 1))
	}
	if os.PatternCombos[mask].Kind == KindNever {
		return rDead, 0
	}
	return rDone, -int32(mask) - 1
}

// numStep feeds c to a number frame.
func numStep(f *frame, c byte) int {
	s := f.n.Number
	nph := numNext(f.ph, c, s.Free)
	if nph == nDot && s.integral {
		nph = 255 // integers are written without a fraction
	}
	if nph == 255 {
		if numComplete(f.ph) && numAccepts(f) {
			return rDoneNext
		}
		return rDead
	}
	// The digits a number may take (number.go): those of its integer part
	// and fraction count in cnt (the 0 of "0." does not), those of its
	// exponent in aux; a point needs room for one fraction digit.
	switch nph {
	case nInt, nFrac:
		if f.cnt >= s.digits {
			return rDead
		}
		f.cnt++
	case nDot:
		if f.cnt >= s.digits {
			return rDead
		}
	case nExp:
		if f.aux >= expDigits {
			return rDead
		}
		f.aux++
	}
	if f.flag&uqItem != 0 && (s.Free || s.fast) {
		f.txt += string([]byte{c}) // the default path keeps it anyway
	}
	switch {
	case s.Free:
	case s.fast:
		if c == '-' {
			f.flag |= nfNeg
		} else {
			// At most intDigits digits (an int64's): no overflow.
			f.seen = f.seen*10 + uint64(c-'0')
			f.aux = int32((int64(f.aux)*10 + int64(c-'0')) % s.mult)
		}
		if !s.fastLive(f.flag&nfNeg != 0, nph, f.seen) {
			return rDead
		}
	case f.flag&nfIn != 0:
		if f.flag&uqItem != 0 {
			f.txt += string(c)
		}
	default:
		f.txt += string(c)
		if !s.live(f.txt, nph) {
			return rDead
		}
		if s.within(f.txt, nph) {
			f.flag |= nfIn
			if f.flag&uqItem == 0 {
				f.txt = ""
			}
		}
	}
	f.ph = nph
	return rCont
}

// numAccepts reports whether the complete number of frame f satisfies its
// spec.
func numAccepts(f *frame) bool {
	s := f.n.Number
	switch {
	case s.Free:
		return true
	case s.fast:
		return s.fastAccepts(f.flag&nfNeg != 0, f.seen, f.aux)
	case f.flag&nfIn != 0:
		return true
	}
	return s.accepts(f.txt)
}

// litStep feeds c to a literal frame.
func litStep(f *frame, c byte) (int, int32) {
	ls := f.n.Literal
	t := ls.Trie
	if nx := t.Child(f.aux, c); nx >= 0 {
		if f.flag&lfUniq != 0 && ls.Under != nil && ls.Under[nx]&^f.seen == 0 {
			return rDead, 0 // only values the array already holds
		}
		f.aux = nx
		if len(t.Nodes[nx].Edges) == 0 {
			return rDone, t.Nodes[nx].Value
		}
		return rCont, 0
	}
	if v := t.Nodes[f.aux].Value; v >= 0 {
		return rDoneNext, v
	}
	return rDead, 0
}

// canEnd reports whether th accepts the end of the input.
func (m *Machine) canEnd(th thread) bool {
	for {
		switch th.f.kind {
		case fRoot:
			return th.f.ph == 1
		case fNumber:
			if !numComplete(th.f.ph) || !numAccepts(&th.f) {
				return false
			}
			var ok bool
			if th, ok = m.finish(th, 0); !ok {
				return false
			}
		case fLit:
			v := th.f.n.Literal.Trie.Nodes[th.f.aux].Value
			if v < 0 {
				return false
			}
			var ok bool
			if th, ok = m.finish(th, v); !ok {
				return false
			}
		default:
			return false
		}
	}
}

// dedupe removes repeated threads, keeping order.
func dedupe(ts []thread) []thread {
	if len(ts) < 2 {
		return ts
	}
	if len(ts) <= 16 {
		out := ts[:1]
	outer:
		for _, t := range ts[1:] {
			for _, u := range out {
				if t == u {
					continue outer
				}
			}
			out = append(out, t)
		}
		return out
	}
	seen := make(map[thread]struct{}, len(ts))
	out := ts[:0]
	for _, t := range ts {
		if _, ok := seen[t]; ok {
			continue
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	return out
}

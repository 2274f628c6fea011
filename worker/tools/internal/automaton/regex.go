package automaton

import (
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// The regular-expression front end: RE2 syntax is parsed with regexp/syntax,
// its program size is estimated before anything is built (so that
// "x{1000}" repeated 3,000 times is rejected in the time it takes to parse),
// and the tree is compiled to a byte-level Thompson NFA: character classes
// become UTF-8 byte-range sequences, so the automaton can follow a token's
// bytes one at a time even when a token ends inside a character.

// Instruction opcodes of the byte NFA.
const (
	opByte   uint8 = iota // consume one byte in [lo, hi], go to out
	opSplit               // go to every pc in alt (epsilon)
	opNop                 // go to out (epsilon)
	opAssert              // empty-width assertion arg, then out
	opMatch               // accept
	opFail                // dead end
)

// Assertion kinds of opAssert.
const (
	assertBeginText uint8 = iota
	assertEndText
	assertBeginLine
	assertEndLine
)

type inst struct {
	op     uint8
	lo, hi byte
	arg    uint8
	out    int32
	alt    []int32
}

// nfa is a set of byte-level automata sharing one instruction array; each
// compiled pattern is a component with its own start pc.
type nfa struct {
	insts    []inst
	hasBegin bool // some BeginText/BeginLine assertion: DFA states carry context
	hasEnd   bool // some EndText/EndLine assertion
	coreach  []bool
	// coreachLater is coreach for positions after the start.
	coreachLater []bool
}

// Mode says how a pattern is matched against a whole string.
type Mode uint8

const (
	// ModeFull: the whole string must match (regex_matcher, formats).
	ModeFull Mode = iota
	// ModeSearch: some substring must match, as JSON Schema "pattern" and
	// Go's MatchString do.
	ModeSearch
)

// Limits bound a pattern before it is compiled.
type Limits struct {
	// MaxBytes caps the length of a pattern's source text.
	MaxBytes int
	// MaxInsts caps the estimated instruction count of its program.
	MaxInsts int
}

// Parse parses pattern with Go's RE2 syntax (the flags regexp.Compile
// uses), rejects it when it is too long or its estimated program too big,
// and returns the simplified tree.
func Parse(pattern string, lim Limits) (*syntax.Regexp, error) {
	if lim.MaxBytes > 0 && len(pattern) > lim.MaxBytes {
		return nil, &PatternError{Pattern: pattern, Message: fmt.Sprintf("pattern is %d bytes, more than the %d allowed", len(pattern), lim.MaxBytes)}
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, &PatternError{Pattern: pattern, Message: err.Error()}
	}
	if n := estimateInsts(re, int64(lim.MaxInsts)+1); lim.MaxInsts > 0 && n > int64(lim.MaxInsts) {
		return nil, &PatternError{Pattern: pattern, Message: fmt.Sprintf("program too large: about %d+ byte instructions, more than the %d allowed", n, lim.MaxInsts)}
	}
	if err := checkAssertions(re); err != nil {
		return nil, &PatternError{Pattern: pattern, Message: err.Error()}
	}
	return re.Simplify(), nil
}

// checkAssertions rejects the assertions the byte automaton cannot follow.
func checkAssertions(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return fmt.Errorf("word-boundary assertions (\\b, \\B) are not supported")
	}
	for _, s := range re.Sub {
		if err := checkAssertions(s); err != nil {
			return err
		}
	}
	return nil
}

// estimateInsts returns an upper bound on the byte instructions re compiles
// to, saturating at limit.
func estimateInsts(re *syntax.Regexp, limit int64) int64 {
	sat := func(n int64) int64 {
		if n > limit {
			return limit
		}
		return n
	}
	switch re.Op {
	case syntax.OpLiteral:
		n := int64(0)
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				n += 3 * int64(utf8.RuneLen(r)+1)
			} else {
				n += int64(utf8.RuneLen(r))
			}
		}
		return sat(n + 1)
	case syntax.OpCharClass:
		n := int64(1)
		for i := 0; i+1 < len(re.Rune); i += 2 {
			utf8Seqs(re.Rune[i], re.Rune[i+1], func(seq []byteRange) { n += int64(len(seq)) })
			if n > limit {
				return limit
			}
		}
		return n
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 30
	case syntax.OpCapture:
		return estimateInsts(re.Sub[0], limit)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sat(estimateInsts(re.Sub[0], limit) + 2)
	case syntax.OpRepeat:
		sub := estimateInsts(re.Sub[0], limit)
		k := int64(re.Max)
		if re.Max < 0 {
			k = int64(re.Min) + 1
		}
		if k == 0 {
			return 1
		}
		if sub > 0 && k > limit/sub {
			return limit
		}
		return sat(sub*k + k + 1)
	case syntax.OpConcat, syntax.OpAlternate:
		n := int64(len(re.Sub)) + 1
		for _, s := range re.Sub {
			n += estimateInsts(s, limit)
			if n > limit {
				return limit
			}
		}
		return n
	default:
		return 1
	}
}

// byteRange is an inclusive range of bytes.
type byteRange struct{ lo, hi byte }

// utf8Seqs calls emit once per sequence of byte ranges such that the byte
// strings matching the sequences are exactly the UTF-8 encodings of the
// runes in [lo, hi]. Surrogates, which UTF-8 cannot encode, are left out.
// The slice passed to emit is reused.
func utf8Seqs(lo, hi rune, emit func([]byteRange)) {
	var buf [utf8.UTFMax]byteRange
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		if lo > hi {
			return
		}
		if hi > unicode.MaxRune {
			hi = unicode.MaxRune
		}
		if lo <= 0xDFFF && hi >= 0xD800 {
			split(lo, 0xD7FF)
			split(0xE000, hi)
			return
		}
		for _, top := range [...]rune{0x7F, 0x7FF, 0xFFFF} {
			if lo <= top && hi > top {
				split(lo, top)
				split(top+1, hi)
				return
			}
		}
		if hi <= 0x7F {
			buf[0] = byteRange{byte(lo), byte(hi)}
			emit(buf[:1])
			return
		}
		n := utf8.RuneLen(lo)
		// Cut the range until, at every byte position, the bytes of lo and
		// hi bound a range that every combination of the others allows.
		for i := 1; i < n; i++ {
			low := rune(1)<<(6*uint(i)) - 1
			if lo&^low != hi&^low {
				if lo&low != 0 {
					split(lo, lo|low)
					split((lo|low)+1, hi)
					return
				}
				if hi&low != low {
					split(lo, (hi&^low)-1)
					split(hi&^low, hi)
					return
				}
			}
		}
		var a, b [utf8.UTFMax]byte
		utf8.EncodeRune(a[:], lo)
		utf8.EncodeRune(b[:], hi)
		for i := 0; i < n; i++ {
			buf[i] = byteRange{a[i], b[i]}
		}
		emit(buf[:n])
	}
	split(lo, hi)
}

// reCompiler builds byte NFAs into one nfa.
type reCompiler struct {
	p     *nfa
	limit int
	clock *limit.Clock
}

func (c *reCompiler) add(in inst) (int32, error) {
	if c.limit > 0 && len(c.p.insts) >= c.limit {
		return 0, fmt.Errorf("program too large: more than %d byte instructions", c.limit)
	}
	c.p.insts = append(c.p.insts, in)
	if len(c.p.insts)&1023 == 0 {
		if err := c.clock.CheckNow(); err != nil {
			return 0, err
		}
	}
	return int32(len(c.p.insts) - 1), nil
}

// component compiles re as a component in the given mode and returns its
// start pc.
func (c *reCompiler) component(re *syntax.Regexp, mode Mode) (int32, error) {
	var match int32
	var err error
	switch mode {
	case ModeSearch:
		// Once the pattern has matched, any bytes may follow.
		loop, err := c.add(inst{op: opSplit})
		if err != nil {
			return 0, err
		}
		m, err := c.add(inst{op: opMatch})
		if err != nil {
			return 0, err
		}
		any, err := c.add(inst{op: opByte, lo: 0, hi: 255, out: loop})
		if err != nil {
			return 0, err
		}
		c.p.insts[loop].alt = []int32{m, any}
		match = loop
	default:
		if match, err = c.add(inst{op: opMatch}); err != nil {
			return 0, err
		}
	}
	start, err := c.compile(re, match)
	if err != nil {
		return 0, err
	}
	if mode == ModeSearch {
		// Any bytes may come before the match.
		loop, err := c.add(inst{op: opSplit})
		if err != nil {
			return 0, err
		}
		any, err := c.add(inst{op: opByte, lo: 0, hi: 255, out: loop})
		if err != nil {
			return 0, err
		}
		c.p.insts[loop].alt = []int32{start, any}
		start = loop
	}
	return start, nil
}

// compile emits re so that it continues at next, returning its entry pc.
func (c *reCompiler) compile(re *syntax.Regexp, next int32) (int32, error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return c.add(inst{op: opFail})
	case syntax.OpEmptyMatch:
		return next, nil
	case syntax.OpLiteral:
		var err error
		for i := len(re.Rune) - 1; i >= 0; i-- {
			r := re.Rune[i]
			if re.Flags&syntax.FoldCase != 0 {
				var rs []rune
				for f := unicode.SimpleFold(r); ; f = unicode.SimpleFold(f) {
					rs = append(rs, f, f)
					if f == r {
						break
					}
				}
				if next, err = c.class(rs, next); err != nil {
					return 0, err
				}
				continue
			}
			var b [utf8.UTFMax]byte
			n := utf8.EncodeRune(b[:], r)
			for j := n - 1; j >= 0; j-- {
				if next, err = c.add(inst{op: opByte, lo: b[j], hi: b[j], out: next}); err != nil {
					return 0, err
				}
			}
		}
		return next, nil
	case syntax.OpCharClass:
		return c.class(re.Rune, next)
	case syntax.OpAnyCharNotNL:
		return c.class([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}, next)
	case syntax.OpAnyChar:
		return c.class([]rune{0, unicode.MaxRune}, next)
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		kind := map[syntax.Op]uint8{
			syntax.OpBeginLine: assertBeginLine, syntax.OpEndLine: assertEndLine,
			syntax.OpBeginText: assertBeginText, syntax.OpEndText: assertEndText,
		}[re.Op]
		if kind == assertBeginLine || kind == assertBeginText {
			c.p.hasBegin = true
		} else {
			c.p.hasEnd = true
		}
		return c.add(inst{op: opAssert, arg: kind, out: next})
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0, fmt.Errorf("word-boundary assertions are not supported")
	case syntax.OpCapture:
		return c.compile(re.Sub[0], next)
	case syntax.OpStar, syntax.OpPlus:
		loop, err := c.add(inst{op: opSplit})
		if err != nil {
			return 0, err
		}
		body, err := c.compile(re.Sub[0], loop)
		if err != nil {
			return 0, err
		}
		c.p.insts[loop].alt = []int32{body, next}
		if re.Op == syntax.OpStar {
			return loop, nil
		}
		return body, nil
	case syntax.OpQuest:
		body, err := c.compile(re.Sub[0], next)
		if err != nil {
			return 0, err
		}
		return c.add(inst{op: opSplit, alt: []int32{body, next}})
	case syntax.OpRepeat:
		// Simplify expands repeats; one left here is a bug upstream.
		return 0, fmt.Errorf("unexpected repeat after simplification")
	case syntax.OpConcat:
		var err error
		for i := len(re.Sub) - 1; i >= 0; i-- {
			if next, err = c.compile(re.Sub[i], next); err != nil {
				return 0, err
			}
		}
		return next, nil
	case syntax.OpAlternate:
		alt := make([]int32, 0, len(re.Sub))
		for _, s := range re.Sub {
			pc, err := c.compile(s, next)
			if err != nil {
				return 0, err
			}
			alt = append(alt, pc)
		}
		return c.add(inst{op: opSplit, alt: alt})
	}
	return 0, fmt.Errorf("unsupported regexp operator %v", re.Op)
}

// class emits the rune class ranges (pairs lo, hi) as UTF-8 byte-range
// sequences, sharing common suffixes.
func (c *reCompiler) class(ranges []rune, next int32) (int32, error) {
	type key struct {
		lo, hi byte
		out    int32
	}
	shared := map[key]int32{}
	var firsts []int32
	seen := map[int32]bool{}
	var err error
	for i := 0; i+1 < len(ranges) && err == nil; i += 2 {
		utf8Seqs(ranges[i], ranges[i+1], func(seq []byteRange) {
			if err != nil {
				return
			}
			out := next
			for j := len(seq) - 1; j >= 0; j-- {
				k := key{seq[j].lo, seq[j].hi, out}
				pc, ok := shared[k]
				if !ok {
					if pc, err = c.add(inst{op: opByte, lo: k.lo, hi: k.hi, out: out}); err != nil {
						return
					}
					shared[k] = pc
				}
				out = pc
			}
			if !seen[out] {
				seen[out] = true
				firsts = append(firsts, out)
			}
		})
	}
	if err != nil {
		return 0, err
	}
	switch len(firsts) {
	case 0:
		return c.add(inst{op: opFail})
	case 1:
		return firsts[0], nil
	}
	return c.add(inst{op: opSplit, alt: firsts})
}

// finish computes which instructions can still reach a match; the DFA drops
// the others so that a state with no way to match is recognised as dead.
func (p *nfa) finish() {
	n := len(p.insts)
	rev := make([][]int32, n)
	for pc, in := range p.insts {
		switch in.op {
		case opByte, opNop, opAssert:
			rev[in.out] = append(rev[in.out], int32(pc))
		case opSplit:
			for _, a := range in.alt {
				rev[a] = append(rev[a], int32(pc))
			}
		}
	}
	reach := func(skipBegin bool) []bool {
		co := make([]bool, n)
		var stack []int32
		for pc, in := range p.insts {
			if in.op == opMatch {
				co[pc] = true
				stack = append(stack, int32(pc))
			}
		}
		for len(stack) > 0 {
			pc := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, q := range rev[pc] {
				if co[q] {
					continue
				}
				if in := &p.insts[q]; skipBegin && in.op == opAssert && in.arg == assertBeginText {
					continue
				}
				co[q] = true
				stack = append(stack, q)
			}
		}
		return co
	}
	p.coreach = reach(false)
	// Past the first byte, a path through \A (or ^ without (?m)) is dead.
	p.coreachLater = reach(true)
}

// InstCount returns the number of instructions of p's automata, the
// measure compiled programs are charged by.
func (p *Program) InstCount() int { return len(p.code.insts) }

// Program is a compiled set of components.
type Program struct {
	code   *nfa
	starts []int32
}

// Compile compiles patterns (with their modes) into one program.
func Compile(res []*syntax.Regexp, modes []Mode, lim Limits, clock *limit.Clock) (*Program, error) {
	c := &reCompiler{p: &nfa{}, limit: lim.MaxInsts * 2, clock: clock}
	rp := &Program{code: c.p}
	for i, re := range res {
		start, err := c.component(re, modes[i])
		if err != nil {
			return nil, err
		}
		rp.starts = append(rp.starts, start)
	}
	c.p.finish()
	return rp, nil
}

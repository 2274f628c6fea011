package tools

import (
	"fmt"

	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// xml_validator: the output is text with XML markup in which only the
// listed tags appear, properly nested and closed. Text is any UTF-8 without
// '<', with '&' only as an entity (&lt; &gt; &amp; &quot; &apos; &#n;
// &#xh;); tags may carry attributes (name="value" or 'value', without '<'
// or '&'), and may be self-closing. Comments, processing instructions and
// CDATA are not allowed. The mask of a text run is cached like a JSON
// string's: only the tokens reaching a '<' or '&' are checked against the
// open tags.

// XML phases.
const (
	xText      uint8 = iota
	xLT              // after '<'
	xOpenName        // reading an opening tag's name
	xAttrs           // inside an opening tag, between attributes
	xAttrName        // reading an attribute name
	xAttrEq          // after an attribute name, before '='
	xAttrQuote       // after '=', before the quote
	xAttrVal         // inside a quoted value
	xAfterVal        // after a value's closing quote
	xSelfClose       // after '/' in an opening tag
	xCloseName       // reading a closing tag's name
	xCloseEnd        // after a closing tag's name
	xEnt             // after '&'
	xEntName         // reading an entity name
	xEntHash         // after "&#"
	xEntDec          // decimal digits
	xEntHexX         // after "&#x"
	xEntHex          // hex digits
)

// maxXMLDepth bounds the nesting of tags.
const maxXMLDepth = 256

type tagStack struct {
	tag   int32
	depth int
	next  *tagStack
}

type xmlState struct {
	ph    uint8
	u8    uint8
	u8lo  uint8
	u8hi  uint8
	quote byte
	n     int32 // trie node (tag name, entity name) or digit count
	stack *tagStack
}

type xmlMachine struct {
	tags  *grammar.ByteTrie
	names []string
	ents  *grammar.ByteTrie
	vi    *vocab.Index
	cache vocab.LeafCache
	mem   *limit.Meter
}

func isNameStart(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_' || b == ':'
}

func isNameByte(b byte) bool {
	return isNameStart(b) || isDigit(b) || b == '-' || b == '.'
}

func newXMLMachine(tags []string, vi *vocab.Index, b Budget) (*xmlMachine, error) {
	m := &xmlMachine{tags: grammar.NewByteTrie(), ents: grammar.NewByteTrie(), vi: vi, mem: limit.NewMeter(b.MaxMemoryBytes)}
	for i, t := range tags {
		if !isNameStart(t[0]) {
			return nil, fmt.Errorf("tag %q is not an XML name", t)
		}
		for j := 1; j < len(t); j++ {
			if !isNameByte(t[j]) {
				return nil, fmt.Errorf("tag %q is not an XML name", t)
			}
		}
		m.tags.Add([]byte(t), int32(i))
		m.names = append(m.names, t)
	}
	for i, e := range []string{"lt", "gt", "amp", "quot", "apos"} {
		m.ents.Add([]byte(e), int32(i))
	}
	m.cache.Init(1024)
	return m, nil
}

// step returns the state after byte c, and false when c is not allowed.
func (m *xmlMachine) step(s xmlState, c byte) (xmlState, bool) {
	if s.u8 > 0 {
		if c < s.u8lo || c > s.u8hi {
			return s, false
		}
		s.u8--
		s.u8lo, s.u8hi = 0x80, 0xBF
		return s, true
	}
	switch s.ph {
	case xText, xLT, xOpenName:
		return m.textStep(s, c)
	case xAttrs, xAfterVal, xAttrName, xAttrEq, xAttrQuote, xAttrVal, xSelfClose:
		return m.attrStep(s, c)
	case xCloseName, xCloseEnd:
		return m.closeStep(s, c)
	}
	return m.entityStep(s, c)
}

// utfByte reports whether c may come next in text or an attribute value
// (no control character but whitespace, a valid UTF-8 lead byte), and
// starts following a multi-byte character.
func utfByte(s *xmlState, c byte) bool {
	if c < 0x80 {
		return c >= 0x20 || c == '\n' || c == '\r' || c == '\t'
	}
	var f grammar.LexState
	if !grammar.UTF8Lead(&f, c) {
		return false
	}
	s.u8, s.u8lo, s.u8hi = f.UTF8Pending, f.UTF8Lo, f.UTF8Hi
	return true
}

// textStep: text, and an opening tag up to the end of its name.
func (m *xmlMachine) textStep(s xmlState, c byte) (xmlState, bool) {
	switch s.ph {
	case xText:
		switch c {
		case '<':
			s.ph = xLT
			return s, true
		case '&':
			s.ph = xEnt
			return s, true
		}
		return s, utfByte(&s, c)
	case xLT:
		if c == '/' && s.stack != nil {
			s.ph, s.n = xCloseName, 0
			return s, true
		}
		if nx := m.tags.Child(0, c); nx >= 0 {
			s.ph, s.n = xOpenName, nx
			return s, true
		}
		return s, false
	case xOpenName:
		if nx := m.tags.Child(s.n, c); nx >= 0 {
			s.n = nx
			return s, true
		}
		tag := m.tags.Nodes[s.n].Value
		if tag < 0 {
			return s, false
		}
		switch {
		case c == '>':
			return m.open(s, tag)
		case c == '/':
			s.ph = xSelfClose
			return s, true
		case grammar.IsJSONSpace(c):
			s.ph, s.n = xAttrs, tag
			return s, true
		}
		return s, false
	}
	return s, false
}

// attrStep: the attributes of an opening tag, up to its end.
func (m *xmlMachine) attrStep(s xmlState, c byte) (xmlState, bool) {
	switch s.ph {
	case xAttrs, xAfterVal:
		switch {
		case c == '>':
			return m.open(s, s.n)
		case c == '/':
			s.ph = xSelfClose
			return s, true
		case grammar.IsJSONSpace(c):
			s.ph = xAttrs
			return s, true
		case isNameStart(c) && s.ph == xAttrs:
			s.ph = xAttrName
			return s, true
		}
		return s, false
	case xAttrName:
		switch {
		case isNameByte(c):
			return s, true
		case c == '=':
			s.ph = xAttrQuote
			return s, true
		case grammar.IsJSONSpace(c):
			s.ph = xAttrEq
			return s, true
		}
		return s, false
	case xAttrEq:
		switch {
		case grammar.IsJSONSpace(c):
			return s, true
		case c == '=':
			s.ph = xAttrQuote
			return s, true
		}
		return s, false
	case xAttrQuote:
		switch {
		case grammar.IsJSONSpace(c):
			return s, true
		case c == '"' || c == '\'':
			s.ph, s.quote = xAttrVal, c
			return s, true
		}
		return s, false
	case xAttrVal:
		switch c {
		case s.quote:
			s.ph = xAfterVal
			return s, true
		case '<', '&':
			return s, false
		}
		return s, utfByte(&s, c)
	case xSelfClose:
		if c == '>' {
			s.ph = xText
			return s, true
		}
		return s, false
	}
	return s, false
}

// closeStep: a closing tag, which must close the innermost open tag.
func (m *xmlMachine) closeStep(s xmlState, c byte) (xmlState, bool) {
	switch s.ph {
	case xCloseName:
		// Only the innermost open tag may close: follow its name.
		if s.stack == nil {
			return s, false
		}
		name := m.names[s.stack.tag]
		if int(s.n) < len(name) {
			if name[s.n] != c {
				return s, false
			}
			s.n++
			return s, true
		}
		switch {
		case c == '>':
			s.stack = s.stack.next
			s.ph = xText
			return s, true
		case grammar.IsJSONSpace(c):
			s.ph = xCloseEnd
			return s, true
		}
		return s, false
	case xCloseEnd:
		switch {
		case grammar.IsJSONSpace(c):
			return s, true
		case c == '>':
			s.stack = s.stack.next
			s.ph = xText
			return s, true
		}
		return s, false
	}
	return s, false
}

// entityStep: a character or entity reference.
func (m *xmlMachine) entityStep(s xmlState, c byte) (xmlState, bool) {
	switch s.ph {
	case xEnt:
		if c == '#' {
			s.ph = xEntHash
			return s, true
		}
		if nx := m.ents.Child(0, c); nx >= 0 {
			s.ph, s.n = xEntName, nx
			return s, true
		}
		return s, false
	case xEntName:
		if c == ';' && m.ents.Nodes[s.n].Value >= 0 {
			s.ph = xText
			return s, true
		}
		if nx := m.ents.Child(s.n, c); nx >= 0 {
			s.n = nx
			return s, true
		}
		return s, false
	case xEntHash:
		if c == 'x' {
			s.ph, s.n = xEntHexX, 0
			return s, true
		}
		if isDigit(c) {
			s.ph, s.n = xEntDec, 1
			return s, true
		}
		return s, false
	case xEntDec, xEntHexX, xEntHex:
		if c == ';' && s.ph != xEntHexX {
			s.ph = xText
			return s, true
		}
		ok := isDigit(c)
		if s.ph != xEntDec {
			ok = grammar.HexValue(c) >= 0
		}
		if !ok || s.n >= 6 {
			return s, false
		}
		s.n++
		if s.ph == xEntHexX {
			s.ph = xEntHex
		}
		return s, true
	}
	return s, false
}

func (m *xmlMachine) open(s xmlState, tag int32) (xmlState, bool) {
	d := 1
	if s.stack != nil {
		d = s.stack.depth + 1
	}
	if d > maxXMLDepth {
		return s, false
	}
	s.stack = &tagStack{tag: tag, depth: d, next: s.stack}
	s.ph = xText
	return s, true
}

// xmlCheck returns why output is not well-formed under m, or "".
func xmlCheck(m *xmlMachine, output []byte) string {
	var s xmlState
	for i, c := range output {
		var ok bool
		if s, ok = m.step(s, c); !ok {
			return fmt.Sprintf("output is not allowed XML at byte %d", i)
		}
	}
	if s.ph != xText || s.u8 != 0 {
		return "output ends inside markup"
	}
	if s.stack != nil {
		return fmt.Sprintf("tag <%s> is not closed", m.names[s.stack.tag])
	}
	return ""
}

type xmlRun struct {
	m  *xmlMachine
	s  xmlState
	w  xmlWalker
	lw xmlLeafWalker
}

func newXMLRun(m *xmlMachine) *xmlRun { return &xmlRun{m: m} }

func (r *xmlRun) Reset() { r.s = xmlState{} }

type xmlWalker struct {
	m  *xmlMachine
	st []xmlState
}

func (w *xmlWalker) Step(k int, b byte, _ int32) bool {
	n, ok := w.m.step(w.st[k-1], b)
	if !ok {
		return false
	}
	w.st[k] = n
	return true
}

// xmlLeafWalker walks from a text state, recording where the text ends.
type xmlLeafWalker struct {
	m     *xmlMachine
	st    []xmlState
	exits []vocab.LeafExit
}

func (w *xmlLeafWalker) Step(k int, b byte, node int32) bool {
	n, ok := w.m.step(w.st[k-1], b)
	if !ok {
		return false
	}
	if n.ph != xText {
		w.exits = append(w.exits, vocab.LeafExit{Node: node, Payload: int32(n.ph)})
		return false
	}
	w.st[k] = n
	return true
}

func (r *xmlRun) Mask(dst []uint64, f *limit.Fuel) (bool, error) {
	m, vi := r.m, r.m.vi
	vocab.ClearMask(dst)
	if r.s.ph != xText {
		w := &r.w
		if len(w.st) < vi.MaxLen+2 {
			w.st = make([]xmlState, vi.MaxLen+2)
		}
		w.m = m
		w.st[0] = r.s
		if err := vi.Walk(-1, w, dst, f); err != nil {
			return false, err
		}
		return false, nil
	}
	// In text: the cached run of text tokens, then the tokens that open
	// markup, checked against the open tags.
	key := vocab.LeafKey{Owner: m, UTF8Pending: r.s.u8, UTF8Lo: r.s.u8lo, UTF8Hi: r.s.u8hi}
	e := m.cache.Get(key)
	if e == nil {
		lw := &r.lw
		if len(lw.st) < vi.MaxLen+2 {
			lw.st = make([]xmlState, vi.MaxLen+2)
		}
		lw.m, lw.exits = m, nil
		lw.st[0] = xmlState{u8: r.s.u8, u8lo: r.s.u8lo, u8hi: r.s.u8hi}
		inside := make([]uint64, vi.Words)
		if err := vi.Walk(-1, lw, inside, f); err != nil {
			return false, err
		}
		e = m.cache.Put(key, &vocab.LeafEntry{Inside: inside, Exits: lw.exits}, m.mem)
	}
	vocab.OrMask(dst, e.Inside)
	w := &r.w
	if len(w.st) < vi.MaxLen+2 {
		w.st = make([]xmlState, vi.MaxLen+2)
	}
	for _, ex := range e.Exits {
		s := xmlState{ph: uint8(ex.Payload), stack: r.s.stack}
		vi.SetNode(dst, ex.Node)
		w.m = m
		w.st[0] = s
		if err := vi.Walk(ex.Node, w, dst, f); err != nil {
			return false, err
		}
	}
	return r.CanEnd(), nil
}

func (r *xmlRun) Accept(p []byte, f *limit.Fuel) (bool, error) {
	s := r.s
	for _, c := range p {
		var ok bool
		if s, ok = r.m.step(s, c); !ok {
			return false, nil
		}
	}
	if err := f.Spend(int64(len(p))); err != nil {
		return false, err
	}
	r.s = s
	return true, nil
}

func (r *xmlRun) CanEnd() bool   { return r.s.ph == xText && r.s.u8 == 0 && r.s.stack == nil }
func (r *xmlRun) Complete() bool { return false }

package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// Compiling a JSON Schema to grammar nodes.
//
// A node is compiled from a conjunction of subschemas (a set of locations
// that must all hold): allOf adds its members, $ref its target, and the
// properties of an object are compiled from every member that speaks about
// them, so allOf is handled by merging without rewriting the schema.
// anyOf and oneOf distribute: a conjunction with an open anyOf becomes an
// alternation of conjunctions, one per branch (oneOf only when its branches
// are provably disjoint). Conjunctions are memoized by their set of
// locations, which makes recursive schemas cyclic graphs.
//
// Whatever has an enum or const becomes a literal set, filtered by the
// validator against every member: any keyword next to an enum is then
// handled exactly, supported or not.

type schemaCompiler struct {
	doc   *schemaDoc
	val   *Validator
	soft  bool
	notes []string // what soft mode left unconstrained, what is checked late
	noted map[string]bool
	// emptyEnum is the first enum: [] compiled, to name when nothing
	// satisfies the schema.
	emptyEnum string
	memo      map[string]*grammar.Node
	all       []*grammar.Node
	lim       Limits
	clock     *limit.Clock
	mem       *limit.Meter
	res       map[string]*syntax.Regexp
	dfas      map[string]*automaton.DFA
	any       *grammar.Node
	never     *grammar.Node
	depth     int
	memErr    error // set when the nodes went over the memory budget
}

// typeSet bits.
const (
	tNull uint8 = 1 << iota
	tBool
	tObj
	tArr
	tStr
	tNum // every number (integers included)
	tInt // integers
	tAll = tNull | tBool | tObj | tArr | tStr | tNum | tInt
)

func typeBits(name string) uint8 {
	switch name {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "object":
		return tObj
	case "array":
		return tArr
	case "string":
		return tStr
	case "number":
		return tNum | tInt
	case "integer":
		return tInt
	}
	return 0
}

func typeMask(v any) uint8 {
	switch t := v.(type) {
	case string:
		return typeBits(t)
	case []any:
		var m uint8
		for _, e := range t {
			if s, ok := e.(string); ok {
				m |= typeBits(s)
			}
		}
		return m
	}
	return tAll
}

func newSchemaCompiler(doc *schemaDoc, val *Validator, soft bool, lim Limits, clock *limit.Clock, mem *limit.Meter) *schemaCompiler {
	c := &schemaCompiler{
		doc: doc, val: val, soft: soft, lim: lim, clock: clock, mem: mem,
		memo:  map[string]*grammar.Node{},
		noted: map[string]bool{},
		res:   map[string]*syntax.Regexp{},
		dfas:  map[string]*automaton.DFA{},
	}
	c.never = c.newNode()
	c.never.Kind = grammar.KindNever
	return c
}

func (c *schemaCompiler) newNode() *grammar.Node {
	if c.memErr == nil {
		c.memErr = c.mem.Charge(512)
	}
	n := &grammar.Node{ID: int32(len(c.all))}
	c.all = append(c.all, n)
	return n
}

// unsupported reports keyword kw at s as something the grammar cannot
// enforce: an error, or in soft mode a note (and nil, so the caller leaves
// the keyword out).
func (c *schemaCompiler) unsupported(s *sloc, kw, msg string) error {
	if c.soft {
		c.notes = append(c.notes, fmt.Sprintf("%s at %s", kw, ptrOrRoot(s.ptr)))
		return nil
	}
	return &Error{keyword: kw, path: ptrOrRoot(s.ptr), msg: msg}
}

func ptrOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// child returns the subschema at keyword path (tokens already escaped) of s.
func (c *schemaCompiler) child(s *sloc, path ...string) *sloc {
	ptr := s.ptr
	for _, p := range path {
		ptr += "/" + p
	}
	if t, ok := c.doc.byPtr[ptr]; ok {
		return t
	}
	v, _ := c.doc.evalPtr(ptr)
	return &sloc{v: v, ptr: ptr, base: s.base}
}

type altGroup struct {
	owner *sloc
	kw    string // anyOf or oneOf
	alts  []*sloc
}

// expansion is a conjunction with allOf and $ref followed.
type expansion struct {
	locs    []*sloc
	set     map[string]bool
	refOnly map[string]bool // drafts 4-7: a $ref hides its siblings
	groups  []altGroup
	// inexact are the not and if keywords without an exact negation
	// (alts unset): inexactKeywords.
	inexact []altGroup
	// logicProduct is the product of the alternative counts of the logic
	// groups (not, if, dependentSchemas) added so far: addLogicGroup.
	logicProduct int
	never        bool
	key          string
	// edges lead from a member to the members it brought in ($ref, allOf,
	// the chosen anyOf/oneOf branch): the scope of its unevaluated*.
	edges map[string][]string
}

// scope returns the members reachable from root (root included).
func (e *expansion) scope(root string) map[string]bool {
	seen := map[string]bool{root: true}
	stack := []string{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, q := range e.edges[p] {
			if !seen[q] {
				seen[q] = true
				stack = append(stack, q)
			}
		}
	}
	return seen
}

func (c *schemaCompiler) expand(members []*sloc) (*expansion, error) {
	e := &expansion{set: map[string]bool{}, refOnly: map[string]bool{}, edges: map[string][]string{}}
	work := append([]*sloc(nil), members...)
	for len(work) > 0 {
		s := work[0]
		work = work[1:]
		if e.set[s.ptr] {
			continue
		}
		if err := c.clock.Check(); err != nil {
			return nil, err
		}
		e.set[s.ptr] = true
		e.locs = append(e.locs, s)
		for _, a := range s.also {
			work = append(work, a)
			e.edges[s.ptr] = append(e.edges[s.ptr], a.ptr)
		}
		switch v := s.v.(type) {
		case bool:
			if !v {
				e.never = true
			}
		case *jsonObject:
			if ref, ok := v.vals["$ref"].(string); ok {
				t, err := c.doc.resolve(s, ref)
				if err != nil {
					return nil, err
				}
				work = append(work, t)
				e.edges[s.ptr] = append(e.edges[s.ptr], t.ptr)
				if c.doc.draft <= draft7 {
					e.refOnly[s.ptr] = true
					continue
				}
			}
			for _, kw := range []string{"$dynamicRef", "$recursiveRef"} {
				if _, ok := v.vals[kw]; ok {
					if err := c.unsupported(s, kw, "dynamic references are not supported"); err != nil {
						return nil, err
					}
				}
			}
			if all, ok := v.vals["allOf"].([]any); ok {
				for i := range all {
					ch := c.child(s, "allOf", strconv.Itoa(i))
					work = append(work, ch)
					e.edges[s.ptr] = append(e.edges[s.ptr], ch.ptr)
				}
			}
			for _, kw := range []string{"anyOf", "oneOf"} {
				if alts, ok := v.vals[kw].([]any); ok {
					g := altGroup{owner: s, kw: kw}
					for i := range alts {
						g.alts = append(g.alts, c.child(s, kw, strconv.Itoa(i)))
					}
					e.groups = append(e.groups, g)
				}
			}
			if err := c.logicGroups(s, v, e); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range e.groups {
		for _, a := range g.alts {
			if e.set[a.ptr] {
				e.edges[g.owner.ptr] = append(e.edges[g.owner.ptr], a.ptr)
			}
		}
	}
	ptrs := make([]string, 0, len(e.set))
	for p := range e.set {
		ptrs = append(ptrs, p)
	}
	sort.Strings(ptrs)
	e.key = strings.Join(ptrs, "\x00")
	return e, nil
}

// anyNode returns the node of the schema true.
func (c *schemaCompiler) anyNode() *grammar.Node {
	if c.any != nil {
		return c.any
	}
	a := c.newNode()
	c.any = a
	a.Kind = grammar.KindAlt
	s := c.newNode()
	s.Kind, s.String = grammar.KindString, &grammar.StrSpec{MaxLen: math.MaxInt32}
	num := c.newNode()
	num.Kind, num.Number = grammar.KindNumber, &grammar.NumSpec{Free: true}
	o := c.newNode()
	o.Kind = grammar.KindObject
	o.Object = &grammar.ObjSpec{Keys: grammar.NewByteTrie(), KeysUnder: []uint64{0}, Words: 1, PatternCombos: []*grammar.Node{a}, MaxProps: math.MaxInt32, MaxKeyLen: math.MaxInt32, FreeKey: true}
	arr := c.newNode()
	arr.Kind, arr.Array = grammar.KindArray, &grammar.ArrSpec{Items: a, MaxItems: math.MaxInt32}
	lit := c.literals([]any{true, false, nil})
	a.Alts = []*grammar.Node{s, num, o, arr, lit}
	return a
}

// literals returns a kLit node for values.
func (c *schemaCompiler) literals(values []any) *grammar.Node {
	n := c.newNode()
	n.Kind = grammar.KindLiteral
	ls := &grammar.LitSpec{Trie: grammar.NewByteTrie()}
	seen := map[string]bool{}
	for _, v := range values {
		k := valueKey(v)
		if seen[k] {
			continue
		}
		seen[k] = true
		idx := int32(len(ls.Values))
		ls.Values = append(ls.Values, v)
		ls.ValueKeys = append(ls.ValueKeys, k)
		ls.Trie.Add(AppendJSON(nil, v, true), idx)
		ls.Trie.Add(AppendJSON(nil, v, false), idx)
	}
	if len(ls.Values) <= 64 {
		ls.Under = make([]uint64, len(ls.Trie.Nodes))
		var fill func(t int32) uint64
		fill = func(t int32) uint64 {
			var m uint64
			if v := ls.Trie.Nodes[t].Value; v >= 0 {
				m |= 1 << uint(v)
			}
			for _, e := range ls.Trie.Nodes[t].Edges {
				m |= fill(e.Node)
			}
			ls.Under[t] = m
			return m
		}
		fill(0)
	}
	n.Literal = ls
	if len(ls.Values) == 0 {
		n.Kind = grammar.KindNever
	}
	return n
}

// compile returns the node for the conjunction of members.
func (c *schemaCompiler) compile(members []*sloc) (*grammar.Node, error) {
	if len(members) == 0 {
		return c.anyNode(), nil
	}
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 2000 {
		return nil, &Error{path: ptrOrRoot(members[0].ptr), msg: "schema nests too deeply"}
	}
	e, err := c.expand(members)
	if err != nil {
		return nil, err
	}
	if e.never {
		return c.never, nil
	}
	if n, ok := c.memo[e.key]; ok {
		return n, nil
	}
	if len(c.all) >= c.lim.MaxSchemaNodes {
		return nil, &Error{path: ptrOrRoot(members[0].ptr), msg: fmt.Sprintf("schema compiles to more than %d grammar nodes", c.lim.MaxSchemaNodes)}
	}
	if c.memErr != nil {
		return nil, c.memErr
	}
	n := c.newNode()
	c.memo[e.key] = n
	n.Building = true
	defer func() { n.Building = false }()

	// An open anyOf/oneOf: one alternative per branch.
	for _, g := range e.groups {
		open := true
		for _, a := range g.alts {
			if e.set[a.ptr] {
				open = false
				break
			}
		}
		if !open {
			continue
		}
		alts := g.alts
		if g.kw == "oneOf" && len(g.alts) > 1 {
			i, j, err := c.checkDisjoint(g, e.locs)
			if err != nil {
				return nil, err
			}
			if i >= 0 {
				if ex, ok := c.exclusiveAlts(g); ok {
					alts = ex
				} else {
					// Compiled as anyOf; that exactly one branch
					// matches is left to the final validation.
					c.late(g.owner, "oneOf", fmt.Sprintf("branches %d and %d may both match one value", i, j))
				}
			}
		}
		n.Kind = grammar.KindAlt
		for _, a := range alts {
			m, err := c.compile(append(append([]*sloc(nil), e.locs...), a))
			if err != nil {
				return nil, err
			}
			if m.Kind == grammar.KindNever {
				continue
			}
			if m.Kind == grammar.KindAlt && !m.Building && m != n {
				n.Alts = append(n.Alts, m.Alts...)
			} else {
				n.Alts = append(n.Alts, m)
			}
		}
		if len(n.Alts) == 0 {
			n.Kind = grammar.KindNever
		}
		return n, nil
	}
	if err := c.build(n, e); err != nil {
		return nil, err
	}
	return n, nil
}

// checkDisjoint looks for two branches of a oneOf that some value the
// conjunction with allows may both satisfy; i is -1 when there are none
// (the oneOf is then an anyOf).
func (c *schemaCompiler) checkDisjoint(g altGroup, with []*sloc) (i, j int, err error) {
	nodes := make([]*grammar.Node, len(g.alts))
	for i, a := range g.alts {
		// Each branch with the rest of the conjunction: only the values
		// it allows matter (a type: object beside the oneOf makes
		// required keys tell the branches apart).
		m, err := c.compile(append(append([]*sloc(nil), with...), a))
		if err != nil {
			return 0, 0, err
		}
		nodes[i] = m
	}
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			if !disjoint(nodes[i], nodes[j], 0) {
				return i, j, nil
			}
		}
	}
	return -1, -1, nil
}

// members returns the objects of e whose own keywords apply.
func (e *expansion) objects() []*sloc {
	var out []*sloc
	for _, s := range e.locs {
		if _, ok := s.v.(*jsonObject); ok && !e.refOnly[s.ptr] {
			out = append(out, s)
		}
	}
	return out
}

func obj(s *sloc) *jsonObject { return s.v.(*jsonObject) }

// build fills n from the keywords of e (no open alternatives).
func (c *schemaCompiler) build(n *grammar.Node, e *expansion) error {
	members := e.objects()
	// A finite set of values: the validator decides which stay.
	for _, s := range members {
		o := obj(s)
		var cands []any
		if v, ok := o.vals["const"]; ok {
			cands = []any{v}
		} else if arr, ok := o.vals["enum"].([]any); ok {
			cands = arr
			if len(arr) == 0 && c.emptyEnum == "" {
				c.emptyEnum = ptrOrRoot(s.ptr)
			}
		} else {
			continue
		}
		var keep []any
		for _, v := range cands {
			ok, err := c.validAll(e, v)
			if err != nil {
				return err
			}
			if ok {
				keep = append(keep, v)
			}
		}
		l := c.literals(keep)
		n.Kind, n.Literal = l.Kind, l.Literal
		return nil
	}

	if err := c.inexactKeywords(e); err != nil {
		return err
	}
	types := tAll
	var excluded []any // values a not {enum/const} rules out
	for _, s := range members {
		o := obj(s)
		if t, ok := o.vals["type"]; ok {
			types &= typeMask(t)
		}
		if ne, ok := o.vals[notEnumKW].([]any); ok {
			excluded = append(excluded, ne...)
		}
	}
	exKeys := map[string]bool{}
	for _, x := range excluded {
		exKeys[valueKey(x)] = true
		switch x.(type) {
		case *jsonObject, []any:
			if types&(tObj|tArr) != 0 {
				c.late(members[0], "not", "an object or array it rules out is not excluded by the grammar")
			}
		}
	}
	var alts []*grammar.Node
	if types&(tNull|tBool) != 0 {
		var lits []any
		if types&tNull != 0 {
			lits = append(lits, nil)
		}
		if types&tBool != 0 {
			lits = append(lits, true, false)
		}
		keep := lits[:0]
		for _, l := range lits {
			if !exKeys[valueKey(l)] {
				keep = append(keep, l)
			}
		}
		alts = append(alts, c.literals(keep))
	}
	if types&tStr != 0 {
		m, err := c.buildString(members)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	if types&(tNum|tInt) != 0 {
		m, err := c.buildNumber(members, types&tNum == 0)
		if err != nil {
			return err
		}
		alts = append(alts, c.excludeNumbers(m, excluded)...)
	}
	if types&tObj != 0 {
		m, err := c.buildObject(members, e)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	if types&tArr != 0 {
		m, err := c.buildArray(members, e)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	var live []*grammar.Node
	for _, a := range alts {
		if a.Kind != grammar.KindNever {
			live = append(live, a)
		}
	}
	switch len(live) {
	case 0:
		n.Kind = grammar.KindNever
	case 1:
		m := live[0]
		n.Kind, n.String, n.Number, n.Object, n.Array, n.Literal, n.Alts = m.Kind, m.String, m.Number, m.Object, m.Array, m.Literal, m.Alts
	default:
		n.Kind, n.Alts = grammar.KindAlt, live
	}
	return nil
}

// validAll reports whether v is valid under every member of e.
func (c *schemaCompiler) validAll(e *expansion, v any) (bool, error) {
	plain := toPlain(v)
	for _, s := range e.locs {
		if err := c.clock.Check(); err != nil {
			return false, err
		}
		if s.synth {
			if ok, err := c.synthValid(s, v); err != nil || !ok {
				return false, err
			}
			continue
		}
		sch, err := c.val.at(s.ptr)
		if err != nil {
			return false, &Error{path: ptrOrRoot(s.ptr), msg: "validator cannot compile this subschema: " + err.Error()}
		}
		if sch.Validate(plain) != nil {
			return false, nil
		}
	}
	return true, nil
}

func annotationKeyword(k string) bool {
	switch k {
	case "title", "description", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly", "$id", "id", "$schema", "$anchor":
		return true
	}
	return false
}

// num reads a JSON number keyword.
func numVal(o *jsonObject, k string) (*big.Rat, bool) {
	n, ok := o.vals[k].(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	return r, ok
}

func intVal(o *jsonObject, k string) (int64, bool) {
	r, ok := numVal(o, k)
	if !ok {
		return 0, false
	}
	if !r.IsInt() {
		// A non-integer bound: strings/items can only have whole counts.
		f, _ := r.Float64()
		return int64(math.Ceil(f)), true
	}
	if !r.Num().IsInt64() {
		if r.Sign() > 0 {
			return math.MaxInt64, true
		}
		return 0, true
	}
	return r.Num().Int64(), true
}

func clamp32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < 0 {
		return 0
	}
	return int32(v)
}

// regex parses a pattern once.
func (c *schemaCompiler) regex(p string) (*syntax.Regexp, error) {
	if re, ok := c.res[p]; ok {
		return re, nil
	}
	re, err := automaton.Parse(p, automaton.Limits{MaxBytes: c.lim.MaxPatternBytes, MaxInsts: c.lim.MaxRegexInsts})
	if err != nil {
		return nil, err
	}
	c.res[p] = re
	return re, nil
}

// regexComp is one DFA component.
type regexComp struct {
	pattern string
	mode    automaton.Mode
}

// dfaFor returns the (shared) DFA of comps; when skip is positive, the
// first skip components need not stay live (object-key patterns).
func (c *schemaCompiler) dfaFor(comps []regexComp, skip ...int) (*automaton.DFA, error) {
	var kb strings.Builder
	if len(skip) > 0 {
		fmt.Fprintf(&kb, "k%d:", skip[0])
	}
	for _, rc := range comps {
		kb.WriteByte(byte('0' + rc.mode))
		kb.WriteString(rc.pattern)
		kb.WriteByte(0)
	}
	if d, ok := c.dfas[kb.String()]; ok {
		return d, nil
	}
	res := make([]*syntax.Regexp, len(comps))
	modes := make([]automaton.Mode, len(comps))
	for i, rc := range comps {
		re, err := c.regex(rc.pattern)
		if err != nil {
			return nil, err
		}
		res[i], modes[i] = re, rc.mode
	}
	prog, err := automaton.Compile(res, modes, automaton.Limits{MaxBytes: c.lim.MaxPatternBytes, MaxInsts: c.lim.MaxRegexInsts * 4}, c.clock)
	if err != nil {
		return nil, err
	}
	if err := c.mem.Charge(int64(prog.InstCount()) * 48); err != nil {
		return nil, err
	}
	d := automaton.NewDFA(prog, c.lim.MaxDFAStates, c.lim.MaxMemoryBytes/4, c.mem)
	if len(skip) > 0 {
		d.MustLive = d.AllComponents &^ (uint64(1)<<uint(skip[0]) - 1)
	}
	c.dfas[kb.String()] = d
	return d, nil
}

// stringParts collects the string keywords of members.
func (c *schemaCompiler) stringParts(members []*sloc) (minLen, maxLen int64, comps []regexComp, err error) {
	maxLen = math.MaxInt32
	for _, s := range members {
		o := obj(s)
		if v, ok := intVal(o, "minLength"); ok && v > minLen {
			minLen = v
		}
		if v, ok := intVal(o, "maxLength"); ok && v < maxLen {
			maxLen = v
		}
		if ne, ok := o.vals[notEnumKW].([]any); ok {
			if words := stringsOf(ne); len(words) > 0 {
				comps = append(comps, regexComp{notInPattern(words), automaton.ModeFull})
			}
		}
		if p, ok := o.vals["pattern"].(string); ok {
			if _, err := c.regex(p); err != nil {
				if err := c.unsupported(s, "pattern", err.Error()); err != nil {
					return 0, 0, nil, err
				}
			} else {
				comps = append(comps, regexComp{p, automaton.ModeSearch})
			}
		}
		if f, ok := o.vals["format"].(string); ok {
			if p, known := FormatPatterns[f]; known {
				comps = append(comps, regexComp{p, automaton.ModeFull})
			} else if c.doc.draft <= draft7 && assertedFormats[f] {
				if err := c.unsupported(s, "format", fmt.Sprintf("format %q is checked by the validator but not supported by the grammar", f)); err != nil {
					return 0, 0, nil, err
				}
			}
		}
		if c.doc.draft <= draft7 {
			if ce, ok := o.vals["contentEncoding"].(string); ok {
				if p, known := contentPatterns[ce]; known {
					comps = append(comps, regexComp{p, automaton.ModeFull})
				}
			}
			if mt, ok := o.vals["contentMediaType"].(string); ok && mt == "application/json" {
				if err := c.unsupported(s, "contentMediaType", "content media types are not supported"); err != nil {
					return 0, 0, nil, err
				}
			}
		}
	}
	return minLen, maxLen, comps, nil
}

func (c *schemaCompiler) buildString(members []*sloc) (*grammar.Node, error) {
	n := c.newNode()
	minLen, maxLen, comps, err := c.stringParts(members)
	if err != nil {
		return nil, err
	}
	if minLen > maxLen {
		n.Kind = grammar.KindNever
		return n, nil
	}
	n.Kind = grammar.KindString
	n.String = &grammar.StrSpec{MinLen: clamp32(minLen), MaxLen: clamp32(maxLen)}
	if len(comps) > 0 {
		d, err := c.dfaFor(comps)
		if err != nil {
			return nil, err
		}
		n.String.DFA = d
	}
	return n, nil
}

func (c *schemaCompiler) buildNumber(members []*sloc, integer bool) (*grammar.Node, error) {
	n := c.newNode()
	s := &grammar.NumSpec{}
	tighten := func(r *big.Rat, ex bool, low bool) {
		if low {
			if s.Lo == nil || r.Cmp(s.Lo) > 0 || r.Cmp(s.Lo) == 0 && ex {
				s.Lo, s.LoExclusive = r, ex
			}
		} else if s.Hi == nil || r.Cmp(s.Hi) < 0 || r.Cmp(s.Hi) == 0 && ex {
			s.Hi, s.HiExclusive = r, ex
		}
	}
	for _, m := range members {
		o := obj(m)
		if c.doc.draft == draft4 {
			exMin, _ := o.vals["exclusiveMinimum"].(bool)
			exMax, _ := o.vals["exclusiveMaximum"].(bool)
			if r, ok := numVal(o, "minimum"); ok {
				tighten(r, exMin, true)
			}
			if r, ok := numVal(o, "maximum"); ok {
				tighten(r, exMax, false)
			}
		} else {
			if r, ok := numVal(o, "minimum"); ok {
				tighten(r, false, true)
			}
			if r, ok := numVal(o, "maximum"); ok {
				tighten(r, false, false)
			}
			if r, ok := numVal(o, "exclusiveMinimum"); ok {
				tighten(r, true, true)
			}
			if r, ok := numVal(o, "exclusiveMaximum"); ok {
				tighten(r, true, false)
			}
		}
		if r, ok := numVal(o, "multipleOf"); ok && r.Sign() > 0 {
			if s.MultipleOf == nil {
				s.MultipleOf = r
			} else {
				s.MultipleOf = grammar.RationalLCM(s.MultipleOf, r)
			}
		}
	}
	if integer {
		one := big.NewRat(1, 1)
		if s.MultipleOf == nil {
			s.MultipleOf = one
		} else {
			s.MultipleOf = grammar.RationalLCM(s.MultipleOf, one)
		}
	}
	s.Free = s.Lo == nil && s.Hi == nil && s.MultipleOf == nil
	n.Kind, n.Number = grammar.KindNumber, s
	if !s.Satisfiable() {
		n.Kind = grammar.KindNever
	}
	for _, ch := range []byte("-0123456789") {
		n.SetFirst(ch)
	}
	return n, nil
}

// excludeNumbers returns the number node m without the numbers among
// excluded (a not enum/const): one node per open interval between them.
func (c *schemaCompiler) excludeNumbers(m *grammar.Node, excluded []any) []*grammar.Node {
	if m.Kind != grammar.KindNumber {
		return []*grammar.Node{m}
	}
	var cuts []*big.Rat
	for _, x := range excluded {
		if n, ok := x.(json.Number); ok {
			if r, ok := new(big.Rat).SetString(string(n)); ok {
				cuts = append(cuts, r)
			}
		}
	}
	if len(cuts) == 0 {
		return []*grammar.Node{m}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].Cmp(cuts[j]) < 0 })
	var out []*grammar.Node
	for i := 0; i <= len(cuts); i++ {
		s := *m.Number
		if i > 0 && (s.Lo == nil || cuts[i-1].Cmp(s.Lo) >= 0) {
			s.Lo, s.LoExclusive = cuts[i-1], true
		}
		if i < len(cuts) && (s.Hi == nil || cuts[i].Cmp(s.Hi) <= 0) {
			s.Hi, s.HiExclusive = cuts[i], true
		}
		s.Free = false
		if !s.Satisfiable() {
			continue
		}
		n := c.newNode()
		n.Kind, n.Number = grammar.KindNumber, &s
		for _, ch := range []byte("-0123456789") {
			n.SetFirst(ch)
		}
		out = append(out, n)
	}
	return out
}

// keyMatches reports whether the (search) pattern p matches name.
func keyMatches(p, name string) bool {
	re, err := regexp.Compile(p)
	return err == nil && re.MatchString(name)
}

type patProp struct {
	member int
	pat    string
	loc    *sloc
}

// objectParts is what the members of an object conjunction say about its
// keys, gathered before any property is compiled.
type objectParts struct {
	members  []*sloc
	names    []string       // known property names, in first-seen order
	index    map[string]int // name -> position in names
	pats     []patProp
	required []string
	deps     []rawDep
	pnLocs   []*sloc // propertyNames subschemas
	unevals  []int   // members with unevaluatedProperties
	unevs    []uneval
}

// rawDep is one dependentRequired (or array-form dependencies) entry.
type rawDep struct {
	if_  string
	then []string
}

// uneval is the unevaluatedProperties of one member: it applies to a key
// that nothing in the member's scope evaluates; additionalProperties, or
// another unevaluatedProperties, in the scope evaluates every key.
type uneval struct {
	loc   *sloc
	scope map[int]bool // member indexes
	all   bool         // every key is evaluated in the scope
}

func (p *objectParts) addName(k string) int {
	if i, ok := p.index[k]; ok {
		return i
	}
	p.index[k] = len(p.names)
	p.names = append(p.names, k)
	return len(p.names) - 1
}

func memberHasAddl(o *jsonObject) bool { _, ok := o.vals["additionalProperties"]; return ok }

func (c *schemaCompiler) buildObject(members []*sloc, e *expansion) (*grammar.Node, error) {
	n := c.newNode()
	n.Kind = grammar.KindObject
	os := &grammar.ObjSpec{Keys: grammar.NewByteTrie(), MaxProps: math.MaxInt32, MaxKeyLen: math.MaxInt32}
	n.Object = os

	p := &objectParts{members: members, index: map[string]int{}}
	for mi, s := range members {
		if err := c.objectMember(p, os, mi, s); err != nil {
			return nil, err
		}
	}
	for _, k := range p.required {
		p.addName(k)
	}
	for _, d := range p.deps {
		p.addName(d.if_)
		for _, t := range d.then {
			p.addName(t)
		}
	}
	if len(p.pats) > 8 {
		if err := c.unsupported(members[0], "patternProperties", fmt.Sprintf("%d patterns; at most 8 are supported", len(p.pats))); err != nil {
			return nil, err
		}
		p.pats = nil
	}
	pnOK, pnComps, err := c.propertyNames(p.pnLocs, os)
	if err != nil {
		return nil, err
	}
	for _, ui := range p.unevals {
		sc := e.scope(members[ui].ptr)
		u := uneval{loc: c.child(members[ui], "unevaluatedProperties"), scope: map[int]bool{}}
		for mi, s := range members {
			if !sc[s.ptr] {
				continue
			}
			u.scope[mi] = true
			o := obj(s)
			if memberHasAddl(o) || mi != ui && o.has("unevaluatedProperties") {
				u.all = true
			}
		}
		p.unevs = append(p.unevs, u)
	}
	if err := c.knownProperties(p, os); err != nil {
		return nil, err
	}
	if err := c.additionalKeys(p, os, pnOK, pnComps); err != nil {
		return nil, err
	}
	keyTrieUnder(os)
	n.SetFirst('{')
	return n, nil
}

// objectMember gathers what member s (at index mi) says about the keys
// into p, and narrows os's property counts.
func (c *schemaCompiler) objectMember(p *objectParts, os *grammar.ObjSpec, mi int, s *sloc) error {
	o := obj(s)
	if props, ok := o.vals["properties"].(*jsonObject); ok {
		for _, k := range props.keys {
			p.addName(k)
		}
	}
	if pp, ok := o.vals["patternProperties"].(*jsonObject); ok {
		for _, pat := range pp.keys {
			if _, err := c.regex(pat); err != nil {
				if err := c.unsupported(s, "patternProperties", err.Error()); err != nil {
					return err
				}
				continue
			}
			p.pats = append(p.pats, patProp{member: mi, pat: pat, loc: c.child(s, "patternProperties", escapePtr(pat))})
		}
	}
	if req, ok := o.vals["required"].([]any); ok {
		for _, r := range req {
			if k, ok := r.(string); ok {
				p.required = append(p.required, k)
			}
		}
	}
	if err := c.objectDeps(p, s); err != nil {
		return err
	}
	if c.doc.draft >= draft2019 {
		if u, ok := o.vals["unevaluatedProperties"]; ok {
			if b, isBool := u.(bool); !isBool || !b {
				p.unevals = append(p.unevals, mi)
			}
		}
	}
	if _, ok := o.vals["propertyNames"]; ok {
		p.pnLocs = append(p.pnLocs, c.child(s, "propertyNames"))
	}
	if v, ok := intVal(o, "minProperties"); ok && clamp32(v) > os.MinProps {
		os.MinProps = clamp32(v)
	}
	if v, ok := intVal(o, "maxProperties"); ok && clamp32(v) < os.MaxProps {
		os.MaxProps = clamp32(v)
	}
	return nil
}

// objectDeps gathers the array-form dependencies (and, from draft 2019,
// dependentRequired) of member s; schema dependencies are unsupported.
func (c *schemaCompiler) objectDeps(p *objectParts, s *sloc) error {
	o := obj(s)
	depKws := []string{"dependencies"}
	if c.doc.draft >= draft2019 {
		depKws = append(depKws, "dependentRequired")
	}
	for _, kw := range depKws {
		dm, ok := o.vals[kw].(*jsonObject)
		if !ok {
			continue
		}
		for _, k := range dm.keys {
			switch dv := dm.vals[k].(type) {
			case []any:
				d := rawDep{if_: k}
				for _, x := range dv {
					if xs, ok := x.(string); ok {
						d.then = append(d.then, xs)
					}
				}
				p.deps = append(p.deps, d)
			}
			// Schema values (and false) are groups of alternatives:
			// logicGroups.
		}
	}
	return nil
}

// propertyNames narrows os's key lengths by the propertyNames subschemas
// and returns the patterns additional keys must match. Known names are
// checked by the validator; additional keys by the string part of each
// propertyNames schema. ok is false when no additional key is allowed.
func (c *schemaCompiler) propertyNames(pnLocs []*sloc, os *grammar.ObjSpec) (ok bool, comps []regexComp, err error) {
	ok = true
	for _, pl := range pnLocs {
		if b, isBool := pl.v.(bool); isBool {
			if !b {
				ok = false
			}
			continue
		}
		pn, err := c.compile([]*sloc{pl})
		if err != nil {
			return false, nil, err
		}
		str := stringPart(pn)
		switch {
		case pn.Kind == grammar.KindNever || str == nil && !hasStringLiterals(pn):
			ok = false
		case str == nil:
			if err := c.unsupported(pl, "propertyNames", "only string constraints (pattern, length, format) are supported in propertyNames"); err != nil {
				return false, nil, err
			}
		default:
			if str.MinLen > os.MinKeyLen {
				os.MinKeyLen = str.MinLen
			}
			if str.MaxLen < os.MaxKeyLen {
				os.MaxKeyLen = str.MaxLen
			}
			if str.DFA != nil {
				cs, err := c.stringCompsOf(pl)
				if err != nil {
					return false, nil, err
				}
				comps = append(comps, cs...)
			}
		}
	}
	return ok, comps, nil
}

// valueSchemas lists the subschemas the value of a key must satisfy: in
// each member, the properties entry named key (when key is not nil) and
// the patternProperties that match it (matches(i) for p.pats[i]), or
// else the member's additionalProperties; then every
// unevaluatedProperties whose scope evaluated the key nowhere. Known
// properties and additional keys (by the patterns they match) both come
// through here.
func (c *schemaCompiler) valueSchemas(p *objectParts, key *string, matches func(i int) bool) []*sloc {
	var conj []*sloc
	evaluated := map[int]bool{}
	for mi, s := range p.members {
		o := obj(s)
		matched := false
		if key != nil {
			if props, ok := o.vals["properties"].(*jsonObject); ok && props.has(*key) {
				conj = append(conj, c.child(s, "properties", escapePtr(*key)))
				matched = true
			}
		}
		for i, pp := range p.pats {
			if pp.member == mi && matches(i) {
				conj = append(conj, pp.loc)
				matched = true
			}
		}
		if matched && !s.synth {
			// A synthetic member (a failed if, a negation) evaluates
			// nothing: it gives no annotations.
			evaluated[mi] = true
		}
		if !matched && memberHasAddl(o) {
			conj = append(conj, c.child(s, "additionalProperties"))
		}
	}
	for _, u := range p.unevs {
		if u.all {
			continue
		}
		hit := false
		for mi := range u.scope {
			hit = hit || evaluated[mi]
		}
		if !hit {
			conj = append(conj, u.loc)
		}
	}
	return conj
}

// knownProperties compiles the value of every known name into os.Props
// and the key trie, then the required set and the dependencies.
func (c *schemaCompiler) knownProperties(p *objectParts, os *grammar.ObjSpec) error {
	for _, k := range p.names {
		if err := c.clock.Check(); err != nil {
			return err
		}
		conj := c.valueSchemas(p, &k, func(i int) bool { return keyMatches(p.pats[i].pat, k) })
		forbidden := false
		for _, pl := range p.pnLocs {
			sch, err := c.val.at(pl.ptr)
			if err != nil {
				return &Error{keyword: "propertyNames", path: ptrOrRoot(pl.ptr), msg: err.Error()}
			}
			if sch.Validate(k) != nil {
				forbidden = true
			}
		}
		var pn *grammar.Node
		if forbidden {
			pn = c.never
		} else {
			var err error
			if pn, err = c.compile(conj); err != nil {
				return err
			}
		}
		os.Props = append(os.Props, grammar.ObjProp{Name: k, Node: pn})
		os.Keys.Add(appendJSONStringBody(nil, k), int32(len(os.Props)-1))
	}
	os.Required = make([]uint64, (len(p.names)+63)/64)
	for _, k := range p.required {
		i := p.index[k]
		if os.Required[i>>6]&(1<<(uint(i)&63)) == 0 {
			os.Required[i>>6] |= 1 << (uint(i) & 63)
			os.NumRequired++
		}
	}
	for _, d := range p.deps {
		od := grammar.ObjDep{If: p.index[d.if_]}
		for _, t := range d.then {
			od.Then = append(od.Then, p.index[t])
		}
		os.Dependencies = append(os.Dependencies, od)
	}
	return nil
}

// additionalKeys compiles the value of an additional key for every
// combination of the patterns it matches (os.Combos, by bitmask), and the
// DFA that tells, key byte by key byte, which patterns match and whether
// propertyNames still allows it.
func (c *schemaCompiler) additionalKeys(p *objectParts, os *grammar.ObjSpec, pnOK bool, pnComps []regexComp) error {
	os.NumPatterns = len(p.pats)
	os.PatternCombos = make([]*grammar.Node, 1<<uint(len(p.pats)))
	for mask := range os.PatternCombos {
		if err := c.clock.Check(); err != nil {
			return err
		}
		conj := c.valueSchemas(p, nil, func(i int) bool { return mask&(1<<uint(i)) != 0 })
		m, err := c.compile(conj)
		if err != nil {
			return err
		}
		if !pnOK {
			m = c.never
		}
		os.PatternCombos[mask] = m
	}
	var comps []regexComp
	for _, pp := range p.pats {
		comps = append(comps, regexComp{pp.pat, automaton.ModeSearch})
	}
	comps = append(comps, pnComps...)
	if len(comps) > 0 {
		d, err := c.dfaFor(comps, len(p.pats))
		if err != nil {
			return err
		}
		os.KeyDFA = d
	}
	os.FreeKey = pnOK && os.MinKeyLen <= os.MaxKeyLen
	return nil
}

// keyTrieUnder fills os.Under: which properties lie below each node of the
// key trie (for liveness when no additional key is possible).
func keyTrieUnder(os *grammar.ObjSpec) {
	w := (len(os.Props) + 63) / 64
	if w == 0 {
		w = 1
	}
	os.Words = w
	os.KeysUnder = make([]uint64, len(os.Keys.Nodes)*w)
	var fill func(t int32)
	fill = func(t int32) {
		row := os.KeysUnder[int(t)*w : int(t+1)*w]
		if v := os.Keys.Nodes[t].Value; v >= 0 {
			row[v>>6] |= 1 << (uint(v) & 63)
		}
		for _, e := range os.Keys.Nodes[t].Edges {
			fill(e.Node)
			vocab.OrMask(row, os.KeysUnder[int(e.Node)*w:int(e.Node+1)*w])
		}
	}
	fill(0)
}

// stringPart returns the string spec a node allows, or nil when it allows
// no strings or more than one string shape.
func stringPart(n *grammar.Node) *grammar.StrSpec {
	switch n.Kind {
	case grammar.KindString:
		return n.String
	case grammar.KindAlt:
		var s *grammar.StrSpec
		for _, a := range n.Alts {
			if a.Kind == grammar.KindString {
				if s != nil {
					return nil
				}
				s = a.String
			}
		}
		return s
	}
	return nil
}

func hasStringLiterals(n *grammar.Node) bool {
	check := func(m *grammar.Node) bool {
		if m.Kind != grammar.KindLiteral {
			return false
		}
		for _, v := range m.Literal.Values {
			if _, ok := v.(string); ok {
				return true
			}
		}
		return false
	}
	if check(n) {
		return true
	}
	if n.Kind == grammar.KindAlt {
		for _, a := range n.Alts {
			if check(a) {
				return true
			}
		}
	}
	return false
}

// stringCompsOf returns the regex components of the string keywords of the
// conjunction at s.
func (c *schemaCompiler) stringCompsOf(s *sloc) ([]regexComp, error) {
	e, err := c.expand([]*sloc{s})
	if err != nil {
		return nil, err
	}
	if len(e.groups) > 0 || len(e.inexact) > 0 {
		// The string node came from alternatives (anyOf, not, ...): its
		// pattern is not the members' own.
		return nil, c.unsupported(s, "propertyNames", "alternatives (anyOf, oneOf, not, if) in propertyNames are not supported")
	}
	_, _, comps, err := c.stringParts(e.objects())
	return comps, err
}

// arrayParts is what the members of an array conjunction say about its
// items, gathered before any item is compiled.
type arrayParts struct {
	parts       []memberItems // by member
	maxPrefix   int
	unique      bool
	containsLoc *sloc
	minContains int32
	maxContains []maxContains
	unevalItems []int // members with unevaluatedItems
	unevs       []unevalItems
}

// memberItems is one member's positional items and the schema of the
// items after them (nil: any).
type memberItems struct {
	prefix []*sloc
	rest   *sloc
}

// maxContains is a member's maxContains bound.
type maxContains struct {
	s *sloc
	v int64
}

// unevalItems is the unevaluatedItems of one member: it applies to the
// items its scope does not evaluate: past the longest prefix, when no
// items/additionalItems (or other unevaluatedItems) in the scope takes the
// rest.
type unevalItems struct {
	loc    *sloc
	prefix int
	all    bool
}

func (c *schemaCompiler) buildArray(members []*sloc, e *expansion) (*grammar.Node, error) {
	n := c.newNode()
	n.Kind = grammar.KindArray
	as := &grammar.ArrSpec{MaxItems: math.MaxInt32}
	n.Array = as
	p := &arrayParts{parts: make([]memberItems, len(members))}
	for i, s := range members {
		never, err := c.arrayMember(p, as, i, s)
		if err != nil {
			return nil, err
		}
		if never {
			n.Kind = grammar.KindNever
			return n, nil
		}
	}
	if err := c.arrayUnevals(p, members, e); err != nil {
		return nil, err
	}
	for i := 0; i < p.maxPrefix; i++ {
		m, err := c.compile(p.itemSchemas(i))
		if err != nil {
			return nil, err
		}
		as.Prefix = append(as.Prefix, m)
	}
	items, err := c.compile(p.itemSchemas(math.MaxInt))
	if err != nil {
		return nil, err
	}
	as.Items = items
	if p.containsLoc != nil {
		as.MinContains = p.minContains
		for i := 0; i <= len(as.Prefix); i++ {
			cn, err := c.compile(append(p.positionSchemas(i), p.containsLoc))
			if err != nil {
				return nil, err
			}
			as.Contains = append(as.Contains, cn)
		}
	}
	for _, mc := range p.maxContains {
		// Counting the items that do not match is beyond the grammar; a
		// bound no array can reach is fine.
		if int64(as.MaxItems) > mc.v {
			if err := c.unsupported(mc.s, "maxContains", "maxContains is not supported"); err != nil {
				return nil, err
			}
		}
	}
	unique := p.unique
	if unique && p.containsLoc != nil {
		c.late(members[0], "uniqueItems", "next to contains")
		unique = false
	}
	if unique {
		if err := c.uniqueItems(n, members[0]); err != nil {
			return nil, err
		}
	}
	n.SetFirst('[')
	return n, nil
}

// positionSchemas lists what the members say about the item at position
// i: its positional schema, or else the schema of the items after the
// prefix. Past every prefix (math.MaxInt) it is the items after them.
func (p *arrayParts) positionSchemas(i int) []*sloc {
	var conj []*sloc
	for _, mp := range p.parts {
		if i < len(mp.prefix) {
			conj = append(conj, mp.prefix[i])
		} else if mp.rest != nil {
			conj = append(conj, mp.rest)
		}
	}
	return conj
}

// itemSchemas lists the subschemas the item at position i must satisfy:
// positionSchemas and every unevaluatedItems that does not see it
// evaluated.
func (p *arrayParts) itemSchemas(i int) []*sloc {
	conj := p.positionSchemas(i)
	for _, u := range p.unevs {
		if !u.all && i >= u.prefix {
			conj = append(conj, u.loc)
		}
	}
	return conj
}

// arrayMember gathers what member s (at index i) says about the items into
// p, and narrows as's item counts. never reports a member no array
// satisfies (contains: false with a positive minContains).
func (c *schemaCompiler) arrayMember(p *arrayParts, as *grammar.ArrSpec, i int, s *sloc) (never bool, err error) {
	o := obj(s)
	var mp memberItems
	if c.doc.draft >= draft2020 {
		if pi, ok := o.vals["prefixItems"].([]any); ok {
			for j := range pi {
				mp.prefix = append(mp.prefix, c.child(s, "prefixItems", strconv.Itoa(j)))
			}
		}
		if _, ok := o.vals["items"]; ok {
			mp.rest = c.child(s, "items")
		}
	} else {
		switch it := o.vals["items"].(type) {
		case []any:
			for j := range it {
				mp.prefix = append(mp.prefix, c.child(s, "items", strconv.Itoa(j)))
			}
			if _, ok := o.vals["additionalItems"]; ok {
				mp.rest = c.child(s, "additionalItems")
			}
		case nil:
		default:
			mp.rest = c.child(s, "items")
		}
	}
	if len(mp.prefix) > p.maxPrefix {
		p.maxPrefix = len(mp.prefix)
	}
	p.parts[i] = mp
	if v, ok := intVal(o, "minItems"); ok && clamp32(v) > as.MinItems {
		as.MinItems = clamp32(v)
	}
	if v, ok := intVal(o, "maxItems"); ok && clamp32(v) < as.MaxItems {
		as.MaxItems = clamp32(v)
	}
	if u, ok := o.vals["uniqueItems"].(bool); ok && u {
		p.unique = true
	}
	if cv, ok := o.vals["contains"]; ok {
		minC := int64(1)
		if c.doc.draft >= draft2019 {
			if v, ok := intVal(o, "minContains"); ok {
				minC = v
			}
		}
		switch t := cv.(type) {
		case bool:
			if t {
				if as.MinItems < clamp32(minC) {
					as.MinItems = clamp32(minC)
				}
			} else if minC > 0 {
				return true, nil
			}
		default:
			if minC > 0 {
				if p.containsLoc != nil && p.containsLoc.ptr != s.ptr+"/contains" {
					if err := c.unsupported(s, "contains", "two contains in one schema are not supported"); err != nil {
						return false, err
					}
				} else {
					p.containsLoc, p.minContains = c.child(s, "contains"), clamp32(minC)
				}
			}
		}
		if c.doc.draft >= draft2019 {
			if v, ok := intVal(o, "maxContains"); ok {
				p.maxContains = append(p.maxContains, maxContains{s, v})
			}
		}
	}
	if c.doc.draft >= draft2019 {
		if u, ok := o.vals["unevaluatedItems"]; ok {
			if b, isBool := u.(bool); !isBool || !b {
				p.unevalItems = append(p.unevalItems, i)
			}
		}
	}
	return false, nil
}

// arrayUnevals works out the scope of every unevaluatedItems into p.unevs.
func (c *schemaCompiler) arrayUnevals(p *arrayParts, members []*sloc, e *expansion) error {
	for _, ui := range p.unevalItems {
		sc := e.scope(members[ui].ptr)
		u := unevalItems{loc: c.child(members[ui], "unevaluatedItems")}
		for mi, s := range members {
			if !sc[s.ptr] {
				continue
			}
			if len(p.parts[mi].prefix) > u.prefix {
				u.prefix = len(p.parts[mi].prefix)
			}
			o := obj(s)
			if p.parts[mi].rest != nil || mi != ui && o.has("unevaluatedItems") {
				u.all = true
			}
			if o.has("contains") {
				if err := c.unsupported(members[ui], "unevaluatedItems", "unevaluatedItems next to contains is not supported"); err != nil {
					return err
				}
				u.all = true
			}
		}
		p.unevs = append(p.unevs, u)
		if u.prefix > p.maxPrefix && !u.all {
			p.maxPrefix = u.prefix
		}
	}
	return nil
}

// uniqueItems makes the items of n pairwise distinct. When every item is a
// literal (at most 64 values), the array remembers which values it holds
// and an item avoids them from its first byte. Otherwise scalar items are
// compared as they end (grammar.ArrSpec.UniqueScalars): a string, number,
// boolean or null equal to an earlier item cannot end; object and array
// items are compared by the final validation (a note).
func (c *schemaCompiler) uniqueItems(n *grammar.Node, s *sloc) error {
	as := n.Array
	nodes := append(append([]*grammar.Node(nil), as.Prefix...), as.Items)
	if len(as.Prefix) == 0 && as.MaxItems <= 1 {
		return nil // at most one item: trivially unique
	}
	ids := map[string]int32{}
	valueIDs := map[*grammar.Node][]int32{}
	literal := true
	for _, m := range nodes {
		if m.Kind == grammar.KindNever {
			continue
		}
		if m.Kind != grammar.KindLiteral {
			literal = false
			break
		}
		vals := make([]int32, len(m.Literal.ValueKeys))
		for i, k := range m.Literal.ValueKeys {
			id, ok := ids[k]
			if !ok {
				id = int32(len(ids))
				ids[k] = id
			}
			vals[i] = id
		}
		valueIDs[m] = vals
	}
	if literal && len(ids) <= 64 {
		as.ValueIDs = valueIDs
		as.Unique = true
		if int32(len(ids)) < as.MaxItems {
			as.MaxItems = int32(len(ids))
		}
		return nil
	}
	as.UniqueScalars = true
	seen := map[*grammar.Node]bool{}
	for _, m := range nodes {
		if mayBeComposite(m, seen) {
			c.late(s, "uniqueItems", "object and array items are compared after generation")
			break
		}
	}
	return nil
}

// mayBeComposite reports whether n allows an object or an array.
func mayBeComposite(n *grammar.Node, seen map[*grammar.Node]bool) bool {
	if seen[n] {
		return false
	}
	seen[n] = true
	switch n.Kind {
	case grammar.KindObject, grammar.KindArray:
		return true
	case grammar.KindAlt:
		for _, a := range n.Alts {
			if mayBeComposite(a, seen) {
				return true
			}
		}
	case grammar.KindLiteral:
		for _, v := range n.Literal.Values {
			switch v.(type) {
			case *jsonObject, []any:
				return true
			}
		}
	}
	return false
}

// finish runs the whole-graph passes: nodes that no finite value satisfies
// become kNever (so the runtime never enters a dead end through them), and
// first-byte sets are computed.
func (c *schemaCompiler) finish() {
	prod := make([]bool, len(c.all))
	isProd := func(m *grammar.Node) bool { return prod[m.ID] }
	for changed := true; changed; {
		changed = false
		for _, n := range c.all {
			if prod[n.ID] {
				continue
			}
			ok := false
			switch n.Kind {
			case grammar.KindLiteral:
				ok = len(n.Literal.Values) > 0
			case grammar.KindString:
				ok = n.String.MinLen <= n.String.MaxLen
			case grammar.KindNumber:
				ok = true
			case grammar.KindAlt:
				for _, a := range n.Alts {
					if isProd(a) {
						ok = true
						break
					}
				}
			case grammar.KindObject:
				os := n.Object
				ok = os.MinProps <= os.MaxProps && int32(os.NumRequired) <= os.MaxProps
				avail := int32(0)
				for i, p := range os.Props {
					pr := isProd(p.Node)
					if pr {
						avail++
					}
					if os.Required[i>>6]&(1<<(uint(i)&63)) != 0 && !pr {
						ok = false
					}
				}
				if ok && !os.FreeKey && avail < os.MinProps {
					ok = false
				}
			case grammar.KindArray:
				as := n.Array
				ok = as.MinItems <= as.MaxItems && as.MinContains <= as.MaxItems
				if as.MinContains > 0 {
					some := false
					for _, cn := range as.Contains {
						some = some || isProd(cn)
					}
					ok = ok && some
				}
				for i := int32(0); ok && i < as.MinItems; i++ {
					if !isProd(as.ItemNode(i)) {
						ok = false
					}
					if int(i) >= len(as.Prefix) {
						break
					}
				}
			}
			if ok {
				prod[n.ID] = true
				changed = true
			}
		}
	}
	for _, n := range c.all {
		if !prod[n.ID] {
			n.Kind = grammar.KindNever
			n.Alts = nil
		}
	}
	for _, n := range c.all {
		if n.Kind == grammar.KindAlt {
			live := n.Alts[:0:0]
			for _, a := range n.Alts {
				if a.Kind != grammar.KindNever {
					live = append(live, a)
				}
			}
			n.Alts = live
		}
		if n.Kind == grammar.KindObject {
			// An additional key whose value can never be valid is not
			// allowed at all.
			free := false
			for _, m := range n.Object.PatternCombos {
				if m.Kind != grammar.KindNever {
					free = true
				}
			}
			n.Object.FreeKey = n.Object.FreeKey && free
		}
	}
	// First bytes.
	for _, n := range c.all {
		n.First = [4]uint64{}
		switch n.Kind {
		case grammar.KindString:
			n.SetFirst('"')
		case grammar.KindNumber:
			for _, ch := range []byte("-0123456789") {
				n.SetFirst(ch)
			}
		case grammar.KindObject:
			n.SetFirst('{')
		case grammar.KindArray:
			n.SetFirst('[')
		case grammar.KindLiteral:
			for _, e := range n.Literal.Trie.Nodes[0].Edges {
				n.SetFirst(e.Byte)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, n := range c.all {
			if n.Kind != grammar.KindAlt {
				continue
			}
			for _, a := range n.Alts {
				for i := range n.First {
					if w := n.First[i] | a.First[i]; w != n.First[i] {
						n.First[i] = w
						changed = true
					}
				}
			}
		}
	}
}

// disjoint reports whether no JSON value can belong to both a and b (false
// when unsure).
func disjoint(a, b *grammar.Node, depth int) bool {
	if a.Building || b.Building || depth > 6 {
		return false
	}
	if a.Kind == grammar.KindNever || b.Kind == grammar.KindNever {
		return true
	}
	if a.Kind == grammar.KindAlt {
		for _, x := range a.Alts {
			if !disjoint(x, b, depth+1) {
				return false
			}
		}
		return true
	}
	if b.Kind == grammar.KindAlt {
		return disjoint(b, a, depth)
	}
	kindOf := func(n *grammar.Node) int {
		switch n.Kind {
		case grammar.KindLiteral:
			return -1
		}
		return int(n.Kind)
	}
	if a.Kind == grammar.KindLiteral && b.Kind == grammar.KindLiteral {
		keys := map[string]bool{}
		for _, k := range a.Literal.ValueKeys {
			keys[k] = true
		}
		for _, k := range b.Literal.ValueKeys {
			if keys[k] {
				return false
			}
		}
		return true
	}
	if a.Kind == grammar.KindLiteral || b.Kind == grammar.KindLiteral {
		l, o := a, b
		if b.Kind == grammar.KindLiteral {
			l, o = b, a
		}
		// A literal can only belong to o if its JSON type matches o's.
		for _, v := range l.Literal.Values {
			if litKind(v) == o.Kind {
				return false
			}
		}
		return true
	}
	if kindOf(a) != kindOf(b) {
		return true
	}
	switch a.Kind {
	case grammar.KindObject:
		// A property both require, whose values cannot agree; or one
		// requires a property the other forbids.
		for i, p := range a.Object.Props {
			reqA := a.Object.Required[i>>6]&(1<<(uint(i)&63)) != 0
			j := b.Object.Keys.Lookup(appendJSONStringBody(nil, p.Name))
			var bn *grammar.Node
			reqB := false
			if j >= 0 {
				bn = b.Object.Props[j].Node
				reqB = b.Object.Required[j>>6]&(1<<(uint(j)&63)) != 0
			} else if b.Object.NumPatterns == 0 {
				bn = b.Object.PatternCombos[0]
			}
			if bn == nil {
				continue
			}
			if reqA && bn.Kind == grammar.KindNever {
				return true
			}
			if reqA && reqB && disjoint(p.Node, bn, depth+1) {
				return true
			}
		}
		for j, p := range b.Object.Props {
			reqB := b.Object.Required[j>>6]&(1<<(uint(j)&63)) != 0
			if !reqB {
				continue
			}
			i := a.Object.Keys.Lookup(appendJSONStringBody(nil, p.Name))
			if i < 0 && a.Object.NumPatterns == 0 && a.Object.PatternCombos[0].Kind == grammar.KindNever {
				return true
			}
			if i >= 0 && a.Object.Props[i].Node.Kind == grammar.KindNever {
				return true
			}
		}
	case grammar.KindNumber:
		x, y := a.Number, b.Number
		if x.Hi != nil && y.Lo != nil && (x.Hi.Cmp(y.Lo) < 0 || x.Hi.Cmp(y.Lo) == 0 && (x.HiExclusive || y.LoExclusive)) {
			return true
		}
		if y.Hi != nil && x.Lo != nil && (y.Hi.Cmp(x.Lo) < 0 || y.Hi.Cmp(x.Lo) == 0 && (y.HiExclusive || x.LoExclusive)) {
			return true
		}
	case grammar.KindArray:
		x, y := a.Array, b.Array
		if x.MaxItems < y.MinItems || y.MaxItems < x.MinItems {
			return true
		}
		for i := int32(0); i < x.MinItems && i < y.MinItems && i < 8; i++ {
			if disjoint(x.ItemNode(i), y.ItemNode(i), depth+1) {
				return true
			}
		}
	case grammar.KindString:
		x, y := a.String, b.String
		if x.MaxLen < y.MinLen || y.MaxLen < x.MinLen {
			return true
		}
	}
	return false
}

// litKind is the node kind a literal value would have.
func litKind(v any) grammar.Kind {
	switch v.(type) {
	case string:
		return grammar.KindString
	case json.Number:
		return grammar.KindNumber
	case *jsonObject:
		return grammar.KindObject
	case []any:
		return grammar.KindArray
	}
	return grammar.KindLiteral // null, true, false
}

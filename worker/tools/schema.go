package tools

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
	doc    *schemaDoc
	val    *schemaValidator
	soft   bool
	notes  []string // what soft mode left unconstrained
	memo   map[string]*node
	all    []*node
	lim    schemaLimits
	clock  *compileClock
	mem    *meter
	res    map[string]*syntax.Regexp
	dfas   map[string]*dfa
	any    *node
	never  *node
	depth  int
	memErr error // set when the nodes went over the memory budget
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

func newSchemaCompiler(doc *schemaDoc, val *schemaValidator, soft bool, lim schemaLimits, clock *compileClock, mem *meter) *schemaCompiler {
	c := &schemaCompiler{
		doc: doc, val: val, soft: soft, lim: lim, clock: clock, mem: mem,
		memo: map[string]*node{},
		res:  map[string]*syntax.Regexp{},
		dfas: map[string]*dfa{},
	}
	c.never = c.newNode("")
	c.never.kind = kNever
	return c
}

func (c *schemaCompiler) newNode(path string) *node {
	if c.memErr == nil {
		c.memErr = c.mem.charge(512)
	}
	n := &node{id: int32(len(c.all)), path: path}
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
	return &schemaError{Keyword: kw, Path: ptrOrRoot(s.ptr), Msg: msg}
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
	never   bool
	key     string
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
		if err := c.clock.check(); err != nil {
			return nil, err
		}
		e.set[s.ptr] = true
		e.locs = append(e.locs, s)
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
func (c *schemaCompiler) anyNode() *node {
	if c.any != nil {
		return c.any
	}
	a := c.newNode("")
	c.any = a
	a.kind = kAlt
	s := c.newNode("")
	s.kind, s.str = kString, &strSpec{maxLen: math.MaxInt32}
	num := c.newNode("")
	num.kind, num.num = kNumber, &numSpec{free: true}
	o := c.newNode("")
	o.kind = kObject
	o.obj = &objSpec{keys: newByteTrie(), under: []uint64{0}, words: 1, combos: []*node{a}, maxProps: math.MaxInt32, pnMax: math.MaxInt32, freeKey: true}
	arr := c.newNode("")
	arr.kind, arr.arr = kArray, &arrSpec{items: a, maxItems: math.MaxInt32}
	lit := c.literals([]any{true, false, nil})
	a.alts = []*node{s, num, o, arr, lit}
	return a
}

// literals returns a kLit node for values.
func (c *schemaCompiler) literals(values []any) *node {
	n := c.newNode("")
	n.kind = kLit
	ls := &litSpec{trie: newByteTrie()}
	seen := map[string]bool{}
	for _, v := range values {
		k := valueKey(v)
		if seen[k] {
			continue
		}
		seen[k] = true
		idx := int32(len(ls.values))
		ls.values = append(ls.values, v)
		ls.keys = append(ls.keys, k)
		ls.trie.add(appendJSON(nil, v, true), idx)
		ls.trie.add(appendJSON(nil, v, false), idx)
	}
	if len(ls.values) <= 64 {
		ls.under = make([]uint64, len(ls.trie.nodes))
		var fill func(t int32) uint64
		fill = func(t int32) uint64 {
			var m uint64
			if v := ls.trie.nodes[t].term; v >= 0 {
				m |= 1 << uint(v)
			}
			for _, e := range ls.trie.nodes[t].kids {
				m |= fill(e.node)
			}
			ls.under[t] = m
			return m
		}
		fill(0)
	}
	n.lit = ls
	if len(ls.values) == 0 {
		n.kind = kNever
	}
	return n
}

// compile returns the node for the conjunction of members.
func (c *schemaCompiler) compile(members []*sloc) (*node, error) {
	if len(members) == 0 {
		return c.anyNode(), nil
	}
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 2000 {
		return nil, &schemaError{Path: ptrOrRoot(members[0].ptr), Msg: "schema nests too deeply"}
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
		return nil, &schemaError{Path: ptrOrRoot(members[0].ptr), Msg: fmt.Sprintf("schema compiles to more than %d grammar nodes", c.lim.MaxSchemaNodes)}
	}
	if c.memErr != nil {
		return nil, c.memErr
	}
	n := c.newNode(e.locs[0].ptr)
	c.memo[e.key] = n
	n.building = true
	defer func() { n.building = false }()

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
		if g.kw == "oneOf" && len(g.alts) > 1 {
			if err := c.checkDisjoint(g); err != nil {
				return nil, err
			}
		}
		n.kind = kAlt
		for _, a := range g.alts {
			m, err := c.compile(append(append([]*sloc(nil), e.locs...), a))
			if err != nil {
				return nil, err
			}
			if m.kind == kNever {
				continue
			}
			if m.kind == kAlt && !m.building && m != n {
				n.alts = append(n.alts, m.alts...)
			} else {
				n.alts = append(n.alts, m)
			}
		}
		if len(n.alts) == 0 {
			n.kind = kNever
		}
		return n, nil
	}
	if err := c.build(n, e); err != nil {
		return nil, err
	}
	return n, nil
}

// checkDisjoint accepts a oneOf whose branches no value can satisfy two at
// a time; otherwise it is unsupported (soft mode: treated as anyOf).
func (c *schemaCompiler) checkDisjoint(g altGroup) error {
	nodes := make([]*node, len(g.alts))
	for i, a := range g.alts {
		m, err := c.compile([]*sloc{a})
		if err != nil {
			return err
		}
		nodes[i] = m
	}
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			if !disjoint(nodes[i], nodes[j], 0) {
				return c.unsupported(g.owner, "oneOf", fmt.Sprintf("branches %d and %d may both match one value; only oneOf with provably disjoint branches is supported", i, j))
			}
		}
	}
	return nil
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
func (c *schemaCompiler) build(n *node, e *expansion) error {
	members := e.objects()
	// A finite set of values: the validator decides which stay.
	for _, s := range members {
		o := obj(s)
		var cands []any
		if v, ok := o.vals["const"]; ok {
			cands = []any{v}
		} else if arr, ok := o.vals["enum"].([]any); ok {
			cands = arr
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
		n.kind, n.lit = l.kind, l.lit
		return nil
	}

	types := tAll
	for _, s := range members {
		o := obj(s)
		if t, ok := o.vals["type"]; ok {
			types &= typeMask(t)
		}
		if err := c.typeIndependent(s, &types); err != nil {
			return err
		}
	}
	var alts []*node
	if types&(tNull|tBool) != 0 {
		var lits []any
		if types&tNull != 0 {
			lits = append(lits, nil)
		}
		if types&tBool != 0 {
			lits = append(lits, true, false)
		}
		alts = append(alts, c.literals(lits))
	}
	if types&tStr != 0 {
		m, err := c.buildString(members, e.locs[0].ptr)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	if types&(tNum|tInt) != 0 {
		m, err := c.buildNumber(members, types&tNum == 0, e.locs[0].ptr)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	if types&tObj != 0 {
		m, err := c.buildObject(members, e, e.locs[0].ptr)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	if types&tArr != 0 {
		m, err := c.buildArray(members, e, e.locs[0].ptr)
		if err != nil {
			return err
		}
		alts = append(alts, m)
	}
	var live []*node
	for _, a := range alts {
		if a.kind != kNever {
			live = append(live, a)
		}
	}
	switch len(live) {
	case 0:
		n.kind = kNever
	case 1:
		m := live[0]
		n.kind, n.str, n.num, n.obj, n.arr, n.lit, n.alts = m.kind, m.str, m.num, m.obj, m.arr, m.lit, m.alts
	default:
		n.kind, n.alts = kAlt, live
	}
	return nil
}

// validAll reports whether v is valid under every member of e.
func (c *schemaCompiler) validAll(e *expansion, v any) (bool, error) {
	plain := toPlain(v)
	for _, s := range e.locs {
		if err := c.clock.check(); err != nil {
			return false, err
		}
		sch, err := c.val.at(s.ptr)
		if err != nil {
			return false, &schemaError{Path: ptrOrRoot(s.ptr), Msg: "validator cannot compile this subschema: " + err.Error()}
		}
		if sch.Validate(plain) != nil {
			return false, nil
		}
	}
	return true, nil
}

// typeIndependent handles not, if/then/else and other keywords that do not
// belong to one type.
func (c *schemaCompiler) typeIndependent(s *sloc, types *uint8) error {
	o := obj(s)
	if nv, ok := o.vals["not"]; ok {
		switch t := nv.(type) {
		case bool:
			if t {
				*types = 0
			}
		case *jsonObject:
			onlyType := len(t.keys) > 0
			for _, k := range t.keys {
				if k != "type" && !annotationKeyword(k) {
					onlyType = false
				}
			}
			if tv, has := t.vals["type"]; onlyType && has {
				m := typeMask(tv)
				// Removing integers but not numbers would leave "numbers
				// that are not integers", which the grammar cannot say.
				if m&tInt != 0 && m&tNum == 0 && *types&tNum != 0 {
					return c.unsupported(s, "not", "not {type: integer} on numbers is not supported")
				}
				*types &^= m
			} else if len(t.keys) == 0 || allAnnotations(t) {
				*types = 0
			} else if err := c.unsupported(s, "not", "only not {type: ...} is supported"); err != nil {
				return err
			}
		}
	}
	if _, ok := o.vals["if"]; ok && (o.has("then") || o.has("else")) {
		if err := c.unsupported(s, "if", "if/then/else is not supported"); err != nil {
			return err
		}
	}
	return nil
}

func annotationKeyword(k string) bool {
	switch k {
	case "title", "description", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly", "$id", "$schema", "$anchor":
		return true
	}
	return false
}

func allAnnotations(o *jsonObject) bool {
	for _, k := range o.keys {
		if !annotationKeyword(k) {
			return false
		}
	}
	return true
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
	re, err := parseRegex(p, regexLimits{maxBytes: c.lim.MaxPatternBytes, maxInsts: c.lim.MaxRegexInsts})
	if err != nil {
		return nil, err
	}
	c.res[p] = re
	return re, nil
}

// regexComp is one DFA component.
type regexComp struct {
	pattern string
	mode    regexMode
}

// dfaFor returns the (shared) DFA of comps; when skip is positive, the
// first skip components need not stay live (object-key patterns).
func (c *schemaCompiler) dfaFor(comps []regexComp, skip ...int) (*dfa, error) {
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
	modes := make([]regexMode, len(comps))
	for i, rc := range comps {
		re, err := c.regex(rc.pattern)
		if err != nil {
			return nil, err
		}
		res[i], modes[i] = re, rc.mode
	}
	prog, err := compileRegexes(res, modes, regexLimits{maxBytes: c.lim.MaxPatternBytes, maxInsts: c.lim.MaxRegexInsts * 4}, c.clock)
	if err != nil {
		return nil, err
	}
	if err := c.mem.charge(int64(len(prog.p.insts)) * 48); err != nil {
		return nil, err
	}
	d := newDFA(prog, c.lim.MaxDFAStates, c.lim.MaxMemoryBytes/4, c.mem)
	if len(skip) > 0 {
		d.need = d.all &^ (uint64(1)<<uint(skip[0]) - 1)
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
		if p, ok := o.vals["pattern"].(string); ok {
			if _, err := c.regex(p); err != nil {
				if err := c.unsupported(s, "pattern", err.Error()); err != nil {
					return 0, 0, nil, err
				}
			} else {
				comps = append(comps, regexComp{p, modeSearch})
			}
		}
		if f, ok := o.vals["format"].(string); ok {
			if p, known := formatPatterns[f]; known {
				comps = append(comps, regexComp{p, modeFull})
			} else if c.doc.draft <= draft7 && assertedFormats[f] {
				if err := c.unsupported(s, "format", fmt.Sprintf("format %q is checked by the validator but not supported by the grammar", f)); err != nil {
					return 0, 0, nil, err
				}
			}
		}
		if c.doc.draft <= draft7 {
			if ce, ok := o.vals["contentEncoding"].(string); ok {
				if p, known := contentPatterns[ce]; known {
					comps = append(comps, regexComp{p, modeFull})
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

func (c *schemaCompiler) buildString(members []*sloc, path string) (*node, error) {
	n := c.newNode(path)
	minLen, maxLen, comps, err := c.stringParts(members)
	if err != nil {
		return nil, err
	}
	if minLen > maxLen {
		n.kind = kNever
		return n, nil
	}
	n.kind = kString
	n.str = &strSpec{minLen: clamp32(minLen), maxLen: clamp32(maxLen)}
	if len(comps) > 0 {
		d, err := c.dfaFor(comps)
		if err != nil {
			return nil, err
		}
		n.str.dfa = d
	}
	return n, nil
}

func (c *schemaCompiler) buildNumber(members []*sloc, integer bool, path string) (*node, error) {
	n := c.newNode(path)
	s := &numSpec{}
	tighten := func(r *big.Rat, ex bool, low bool) {
		if low {
			if s.lo == nil || r.Cmp(s.lo) > 0 || r.Cmp(s.lo) == 0 && ex {
				s.lo, s.loEx = r, ex
			}
		} else if s.hi == nil || r.Cmp(s.hi) < 0 || r.Cmp(s.hi) == 0 && ex {
			s.hi, s.hiEx = r, ex
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
			if s.mult == nil {
				s.mult = r
			} else {
				s.mult = ratLCM(s.mult, r)
			}
		}
	}
	if integer {
		one := big.NewRat(1, 1)
		if s.mult == nil {
			s.mult = one
		} else {
			s.mult = ratLCM(s.mult, one)
		}
	}
	s.free = s.lo == nil && s.hi == nil && s.mult == nil
	s.intOnly = s.lo == nil && s.hi == nil && s.mult != nil && s.mult.Cmp(big.NewRat(1, 1)) == 0
	n.kind, n.num = kNumber, s
	if !s.satisfiable() {
		n.kind = kNever
	}
	for _, ch := range []byte("-0123456789") {
		n.setFirst(ch)
	}
	return n, nil
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

func (c *schemaCompiler) buildObject(members []*sloc, e *expansion, path string) (*node, error) {
	n := c.newNode(path)
	n.kind = kObject
	os := &objSpec{keys: newByteTrie(), maxProps: math.MaxInt32, pnMax: math.MaxInt32}
	n.obj = os

	var names []string
	index := map[string]int{}
	addName := func(k string) int {
		if i, ok := index[k]; ok {
			return i
		}
		index[k] = len(names)
		names = append(names, k)
		return len(names) - 1
	}
	var pats []patProp
	var required []string
	type rawDep struct {
		if_  string
		then []string
	}
	var deps []rawDep
	var pnLocs []*sloc
	var unevals []int // members with unevaluatedProperties
	for mi, s := range members {
		o := obj(s)
		if props, ok := o.vals["properties"].(*jsonObject); ok {
			for _, k := range props.keys {
				addName(k)
			}
		}
		if pp, ok := o.vals["patternProperties"].(*jsonObject); ok {
			for _, p := range pp.keys {
				if _, err := c.regex(p); err != nil {
					if err := c.unsupported(s, "patternProperties", err.Error()); err != nil {
						return nil, err
					}
					continue
				}
				pats = append(pats, patProp{member: mi, pat: p, loc: c.child(s, "patternProperties", escapePtr(p))})
			}
		}
		if req, ok := o.vals["required"].([]any); ok {
			for _, r := range req {
				if k, ok := r.(string); ok {
					required = append(required, k)
				}
			}
		}
		depKws := []string{"dependencies"}
		if c.doc.draft >= draft2019 {
			depKws = append(depKws, "dependentRequired")
		}
		for _, kw := range depKws {
			if dm, ok := o.vals[kw].(*jsonObject); ok {
				for _, k := range dm.keys {
					switch dv := dm.vals[k].(type) {
					case []any:
						d := rawDep{if_: k}
						for _, x := range dv {
							if xs, ok := x.(string); ok {
								d.then = append(d.then, xs)
							}
						}
						deps = append(deps, d)
					case bool:
						if !dv {
							if err := c.unsupported(s, kw, "a false dependent schema is not supported"); err != nil {
								return nil, err
							}
						}
					default:
						if kw == "dependencies" {
							if err := c.unsupported(s, kw, "schema dependencies are not supported"); err != nil {
								return nil, err
							}
						}
					}
				}
			}
		}
		if c.doc.draft >= draft2019 {
			if ds, ok := o.vals["dependentSchemas"].(*jsonObject); ok {
				for _, k := range ds.keys {
					if b, isBool := ds.vals[k].(bool); !isBool || !b {
						if err := c.unsupported(s, "dependentSchemas", "dependent schemas are not supported"); err != nil {
							return nil, err
						}
						break
					}
				}
			}
			if u, ok := o.vals["unevaluatedProperties"]; ok {
				if b, isBool := u.(bool); !isBool || !b {
					unevals = append(unevals, mi)
				}
			}
		}
		if _, ok := o.vals["propertyNames"]; ok {
			pnLocs = append(pnLocs, c.child(s, "propertyNames"))
		}
		if v, ok := intVal(o, "minProperties"); ok && clamp32(v) > os.minProps {
			os.minProps = clamp32(v)
		}
		if v, ok := intVal(o, "maxProperties"); ok && clamp32(v) < os.maxProps {
			os.maxProps = clamp32(v)
		}
	}
	for _, k := range required {
		addName(k)
	}
	for _, d := range deps {
		addName(d.if_)
		for _, t := range d.then {
			addName(t)
		}
	}
	if len(pats) > 8 {
		if err := c.unsupported(members[0], "patternProperties", fmt.Sprintf("%d patterns; at most 8 are supported", len(pats))); err != nil {
			return nil, err
		}
		pats = nil
	}

	// propertyNames: known names are checked by the validator; additional
	// keys by the string part of each propertyNames schema.
	pnOK := true
	var pnComps []regexComp
	for _, pl := range pnLocs {
		if b, ok := pl.v.(bool); ok {
			if !b {
				pnOK = false
			}
			continue
		}
		pn, err := c.compile([]*sloc{pl})
		if err != nil {
			return nil, err
		}
		str := stringPart(pn)
		switch {
		case pn.kind == kNever || str == nil && !hasStringLiterals(pn):
			pnOK = false
		case str == nil:
			if err := c.unsupported(pl, "propertyNames", "only string constraints (pattern, length, format) are supported in propertyNames"); err != nil {
				return nil, err
			}
		default:
			if str.minLen > os.pnMin {
				os.pnMin = str.minLen
			}
			if str.maxLen < os.pnMax {
				os.pnMax = str.maxLen
			}
			if str.dfa != nil {
				comps, err := c.stringCompsOf(pl)
				if err != nil {
					return nil, err
				}
				pnComps = append(pnComps, comps...)
			}
		}
	}

	memberHasAddl := func(o *jsonObject) bool { _, ok := o.vals["additionalProperties"]; return ok }
	// unevaluatedProperties of member u applies to a key that nothing in
	// u's scope evaluates; additionalProperties, or another
	// unevaluatedProperties, in the scope evaluates every key.
	type uneval struct {
		loc   *sloc
		scope map[int]bool // member indexes
		all   bool         // every key is evaluated in the scope
	}
	var unevs []uneval
	for _, ui := range unevals {
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
		unevs = append(unevs, u)
	}

	// Known properties.
	for _, k := range names {
		if err := c.clock.check(); err != nil {
			return nil, err
		}
		var conj []*sloc
		forbidden := false
		evaluated := map[int]bool{}
		for mi, s := range members {
			o := obj(s)
			matched := false
			if props, ok := o.vals["properties"].(*jsonObject); ok && props.has(k) {
				conj = append(conj, c.child(s, "properties", escapePtr(k)))
				matched = true
			}
			for _, pp := range pats {
				if pp.member == mi && keyMatches(pp.pat, k) {
					conj = append(conj, pp.loc)
					matched = true
				}
			}
			if matched {
				evaluated[mi] = true
			}
			if !matched && memberHasAddl(o) {
				conj = append(conj, c.child(s, "additionalProperties"))
			}
		}
		for _, u := range unevs {
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
		for _, pl := range pnLocs {
			sch, err := c.val.at(pl.ptr)
			if err != nil {
				return nil, &schemaError{Keyword: "propertyNames", Path: ptrOrRoot(pl.ptr), Msg: err.Error()}
			}
			if sch.Validate(k) != nil {
				forbidden = true
			}
		}
		var pn *node
		if forbidden {
			pn = c.never
		} else {
			var err error
			if pn, err = c.compile(conj); err != nil {
				return nil, err
			}
		}
		os.props = append(os.props, objProp{name: k, node: pn})
		os.keys.add(appendJSONStringBody(nil, k), int32(len(os.props)-1))
	}
	os.required = make([]uint64, (len(names)+63)/64)
	for _, k := range required {
		i := index[k]
		if os.required[i>>6]&(1<<(uint(i)&63)) == 0 {
			os.required[i>>6] |= 1 << (uint(i) & 63)
			os.nreq++
		}
	}
	for _, d := range deps {
		od := objDep{if_: index[d.if_]}
		for _, t := range d.then {
			od.then = append(od.then, index[t])
		}
		os.deps = append(os.deps, od)
	}

	// Additional keys, by the patterns they match.
	os.npat = len(pats)
	os.combos = make([]*node, 1<<uint(len(pats)))
	for mask := range os.combos {
		if err := c.clock.check(); err != nil {
			return nil, err
		}
		var conj []*sloc
		evaluated := map[int]bool{}
		for mi, s := range members {
			o := obj(s)
			matched := false
			for i, pp := range pats {
				if pp.member == mi && mask&(1<<uint(i)) != 0 {
					conj = append(conj, pp.loc)
					matched = true
				}
			}
			if matched {
				evaluated[mi] = true
			}
			if !matched && memberHasAddl(o) {
				conj = append(conj, c.child(s, "additionalProperties"))
			}
		}
		for _, u := range unevs {
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
		m, err := c.compile(conj)
		if err != nil {
			return nil, err
		}
		if !pnOK {
			m = c.never
		}
		os.combos[mask] = m
	}
	var comps []regexComp
	for _, pp := range pats {
		comps = append(comps, regexComp{pp.pat, modeSearch})
	}
	comps = append(comps, pnComps...)
	if len(comps) > 0 {
		d, err := c.dfaFor(comps, len(pats))
		if err != nil {
			return nil, err
		}
		os.keyDFA = d
	}
	os.freeKey = pnOK && os.pnMin <= os.pnMax
	// Key trie: which props lie below each node (for liveness when no
	// additional key is possible).
	w := (len(os.props) + 63) / 64
	if w == 0 {
		w = 1
	}
	os.words = w
	os.under = make([]uint64, len(os.keys.nodes)*w)
	var fill func(t int32)
	fill = func(t int32) {
		row := os.under[int(t)*w : int(t+1)*w]
		if v := os.keys.nodes[t].term; v >= 0 {
			row[v>>6] |= 1 << (uint(v) & 63)
		}
		for _, e := range os.keys.nodes[t].kids {
			fill(e.node)
			orMask(row, os.under[int(e.node)*w:int(e.node+1)*w])
		}
	}
	fill(0)
	n.setFirst('{')
	return n, nil
}

// stringPart returns the string spec a node allows, or nil when it allows
// no strings or more than one string shape.
func stringPart(n *node) *strSpec {
	switch n.kind {
	case kString:
		return n.str
	case kAlt:
		var s *strSpec
		for _, a := range n.alts {
			if a.kind == kString {
				if s != nil {
					return nil
				}
				s = a.str
			}
		}
		return s
	}
	return nil
}

func hasStringLiterals(n *node) bool {
	check := func(m *node) bool {
		if m.kind != kLit {
			return false
		}
		for _, v := range m.lit.values {
			if _, ok := v.(string); ok {
				return true
			}
		}
		return false
	}
	if check(n) {
		return true
	}
	if n.kind == kAlt {
		for _, a := range n.alts {
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
	_, _, comps, err := c.stringParts(e.objects())
	return comps, err
}

func (c *schemaCompiler) buildArray(members []*sloc, e *expansion, path string) (*node, error) {
	n := c.newNode(path)
	n.kind = kArray
	as := &arrSpec{maxItems: math.MaxInt32}
	n.arr = as
	type arrParts struct {
		prefix []*sloc
		rest   *sloc
	}
	parts := make([]arrParts, len(members))
	maxPrefix := 0
	unique := false
	var containsLoc *sloc
	var minContains int32
	type maxC struct {
		s *sloc
		v int64
	}
	var maxContains []maxC
	var unevalItems []int
	for i, s := range members {
		o := obj(s)
		var p arrParts
		if c.doc.draft >= draft2020 {
			if pi, ok := o.vals["prefixItems"].([]any); ok {
				for j := range pi {
					p.prefix = append(p.prefix, c.child(s, "prefixItems", strconv.Itoa(j)))
				}
			}
			if _, ok := o.vals["items"]; ok {
				p.rest = c.child(s, "items")
			}
		} else {
			switch it := o.vals["items"].(type) {
			case []any:
				for j := range it {
					p.prefix = append(p.prefix, c.child(s, "items", strconv.Itoa(j)))
				}
				if _, ok := o.vals["additionalItems"]; ok {
					p.rest = c.child(s, "additionalItems")
				}
			case nil:
			default:
				p.rest = c.child(s, "items")
			}
		}
		if len(p.prefix) > maxPrefix {
			maxPrefix = len(p.prefix)
		}
		parts[i] = p
		if v, ok := intVal(o, "minItems"); ok && clamp32(v) > as.minItems {
			as.minItems = clamp32(v)
		}
		if v, ok := intVal(o, "maxItems"); ok && clamp32(v) < as.maxItems {
			as.maxItems = clamp32(v)
		}
		if u, ok := o.vals["uniqueItems"].(bool); ok && u {
			unique = true
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
					if as.minItems < clamp32(minC) {
						as.minItems = clamp32(minC)
					}
				} else if minC > 0 {
					n.kind = kNever
					return n, nil
				}
			default:
				if minC > 0 {
					if containsLoc != nil && containsLoc.ptr != s.ptr+"/contains" {
						if err := c.unsupported(s, "contains", "two contains in one schema are not supported"); err != nil {
							return nil, err
						}
					} else {
						containsLoc, minContains = c.child(s, "contains"), clamp32(minC)
					}
				}
			}
			if c.doc.draft >= draft2019 {
				if v, ok := intVal(o, "maxContains"); ok {
					maxContains = append(maxContains, maxC{s, v})
				}
			}
		}
		if c.doc.draft >= draft2019 {
			if u, ok := o.vals["unevaluatedItems"]; ok {
				if b, isBool := u.(bool); !isBool || !b {
					unevalItems = append(unevalItems, i)
				}
			}
		}
	}
	// unevaluatedItems of member u applies to the items its scope does not
	// evaluate: past the longest prefix, when no items/additionalItems (or
	// other unevaluatedItems) in the scope takes the rest.
	type uneval struct {
		loc    *sloc
		prefix int
		all    bool
	}
	var unevs []uneval
	for _, ui := range unevalItems {
		sc := e.scope(members[ui].ptr)
		u := uneval{loc: c.child(members[ui], "unevaluatedItems")}
		for mi, s := range members {
			if !sc[s.ptr] {
				continue
			}
			if len(parts[mi].prefix) > u.prefix {
				u.prefix = len(parts[mi].prefix)
			}
			o := obj(s)
			if parts[mi].rest != nil || mi != ui && o.has("unevaluatedItems") {
				u.all = true
			}
			if o.has("contains") {
				if err := c.unsupported(members[ui], "unevaluatedItems", "unevaluatedItems next to contains is not supported"); err != nil {
					return nil, err
				}
				u.all = true
			}
		}
		unevs = append(unevs, u)
		if u.prefix > maxPrefix && !u.all {
			maxPrefix = u.prefix
		}
	}
	for i := 0; i < maxPrefix; i++ {
		var conj []*sloc
		for _, p := range parts {
			if i < len(p.prefix) {
				conj = append(conj, p.prefix[i])
			} else if p.rest != nil {
				conj = append(conj, p.rest)
			}
		}
		for _, u := range unevs {
			if !u.all && i >= u.prefix {
				conj = append(conj, u.loc)
			}
		}
		m, err := c.compile(conj)
		if err != nil {
			return nil, err
		}
		as.prefix = append(as.prefix, m)
	}
	var conj []*sloc
	for _, p := range parts {
		if p.rest != nil {
			conj = append(conj, p.rest)
		}
	}
	for _, u := range unevs {
		if !u.all {
			conj = append(conj, u.loc)
		}
	}
	items, err := c.compile(conj)
	if err != nil {
		return nil, err
	}
	as.items = items
	if containsLoc != nil {
		as.minContains = minContains
		for i := 0; i <= len(as.prefix); i++ {
			var conj []*sloc
			for _, p := range parts {
				if i < len(p.prefix) {
					conj = append(conj, p.prefix[i])
				} else if p.rest != nil {
					conj = append(conj, p.rest)
				}
			}
			cn, err := c.compile(append(conj, containsLoc))
			if err != nil {
				return nil, err
			}
			as.contains = append(as.contains, cn)
		}
	}
	for _, mc := range maxContains {
		// Counting the items that do not match is beyond the grammar; a
		// bound no array can reach is fine.
		if int64(as.maxItems) > mc.v {
			if err := c.unsupported(mc.s, "maxContains", "maxContains is not supported"); err != nil {
				return nil, err
			}
		}
	}
	if unique && containsLoc != nil {
		if err := c.unsupported(members[0], "uniqueItems", "uniqueItems together with contains is not supported"); err != nil {
			return nil, err
		}
		unique = false
	}
	if unique {
		if err := c.uniqueItems(n, members[0]); err != nil {
			return nil, err
		}
	}
	n.setFirst('[')
	return n, nil
}

// uniqueItems supports uniqueItems when every item is a literal: the array
// then remembers which values it has seen.
func (c *schemaCompiler) uniqueItems(n *node, s *sloc) error {
	as := n.arr
	nodes := append(append([]*node(nil), as.prefix...), as.items)
	ids := map[string]int32{}
	as.uniq = map[*node][]int32{}
	for _, m := range nodes {
		if m.kind == kNever {
			continue
		}
		if m.kind != kLit {
			if len(as.prefix) == 0 && as.maxItems <= 1 {
				return nil // at most one item: trivially unique
			}
			return c.unsupported(s, "uniqueItems", "uniqueItems is supported only for arrays of enum/const/boolean/null items")
		}
		vals := make([]int32, len(m.lit.keys))
		for i, k := range m.lit.keys {
			id, ok := ids[k]
			if !ok {
				id = int32(len(ids))
				ids[k] = id
			}
			vals[i] = id
		}
		as.uniq[m] = vals
	}
	if len(ids) > 64 {
		return c.unsupported(s, "uniqueItems", "uniqueItems is supported for at most 64 distinct item values")
	}
	as.unique = true
	if int32(len(ids)) < as.maxItems {
		as.maxItems = int32(len(ids))
	}
	return nil
}

// finish runs the whole-graph passes: nodes that no finite value satisfies
// become kNever (so the runtime never enters a dead end through them), and
// first-byte sets are computed.
func (c *schemaCompiler) finish() {
	prod := make([]bool, len(c.all))
	isProd := func(m *node) bool { return prod[m.id] }
	for changed := true; changed; {
		changed = false
		for _, n := range c.all {
			if prod[n.id] {
				continue
			}
			ok := false
			switch n.kind {
			case kLit:
				ok = len(n.lit.values) > 0
			case kString:
				ok = n.str.minLen <= n.str.maxLen
			case kNumber:
				ok = true
			case kAlt:
				for _, a := range n.alts {
					if isProd(a) {
						ok = true
						break
					}
				}
			case kObject:
				os := n.obj
				ok = os.minProps <= os.maxProps && int32(os.nreq) <= os.maxProps
				avail := int32(0)
				for i, p := range os.props {
					pr := isProd(p.node)
					if pr {
						avail++
					}
					if os.required[i>>6]&(1<<(uint(i)&63)) != 0 && !pr {
						ok = false
					}
				}
				if ok && !os.freeKey && avail < os.minProps {
					ok = false
				}
			case kArray:
				as := n.arr
				ok = as.minItems <= as.maxItems && as.minContains <= as.maxItems
				if as.minContains > 0 {
					some := false
					for _, cn := range as.contains {
						some = some || isProd(cn)
					}
					ok = ok && some
				}
				for i := int32(0); ok && i < as.minItems; i++ {
					if !isProd(as.itemNode(i)) {
						ok = false
					}
					if int(i) >= len(as.prefix) {
						break
					}
				}
			}
			if ok {
				prod[n.id] = true
				changed = true
			}
		}
	}
	for _, n := range c.all {
		if !prod[n.id] {
			n.kind = kNever
			n.alts = nil
		}
	}
	for _, n := range c.all {
		if n.kind == kAlt {
			live := n.alts[:0:0]
			for _, a := range n.alts {
				if a.kind != kNever {
					live = append(live, a)
				}
			}
			n.alts = live
		}
		if n.kind == kObject {
			// An additional key whose value can never be valid is not
			// allowed at all.
			free := false
			for _, m := range n.obj.combos {
				if m.kind != kNever {
					free = true
				}
			}
			n.obj.freeKey = n.obj.freeKey && free
		}
	}
	// First bytes.
	for _, n := range c.all {
		n.first = [4]uint64{}
		switch n.kind {
		case kString:
			n.setFirst('"')
		case kNumber:
			for _, ch := range []byte("-0123456789") {
				n.setFirst(ch)
			}
		case kObject:
			n.setFirst('{')
		case kArray:
			n.setFirst('[')
		case kLit:
			for _, e := range n.lit.trie.nodes[0].kids {
				n.setFirst(e.b)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, n := range c.all {
			if n.kind != kAlt {
				continue
			}
			for _, a := range n.alts {
				for i := range n.first {
					if w := n.first[i] | a.first[i]; w != n.first[i] {
						n.first[i] = w
						changed = true
					}
				}
			}
		}
	}
}

// disjoint reports whether no JSON value can belong to both a and b (false
// when unsure).
func disjoint(a, b *node, depth int) bool {
	if a.building || b.building || depth > 6 {
		return false
	}
	if a.kind == kNever || b.kind == kNever {
		return true
	}
	if a.kind == kAlt {
		for _, x := range a.alts {
			if !disjoint(x, b, depth+1) {
				return false
			}
		}
		return true
	}
	if b.kind == kAlt {
		return disjoint(b, a, depth)
	}
	kindOf := func(n *node) int {
		switch n.kind {
		case kLit:
			return -1
		}
		return int(n.kind)
	}
	if a.kind == kLit && b.kind == kLit {
		keys := map[string]bool{}
		for _, k := range a.lit.keys {
			keys[k] = true
		}
		for _, k := range b.lit.keys {
			if keys[k] {
				return false
			}
		}
		return true
	}
	if a.kind == kLit || b.kind == kLit {
		l, o := a, b
		if b.kind == kLit {
			l, o = b, a
		}
		// A literal can only belong to o if its JSON type matches o's.
		for _, v := range l.lit.values {
			if litKind(v) == o.kind {
				return false
			}
		}
		return true
	}
	if kindOf(a) != kindOf(b) {
		return true
	}
	switch a.kind {
	case kObject:
		// A property both require, whose values cannot agree; or one
		// requires a property the other forbids.
		for i, p := range a.obj.props {
			reqA := a.obj.required[i>>6]&(1<<(uint(i)&63)) != 0
			j := b.obj.keys.lookup(appendJSONStringBody(nil, p.name))
			var bn *node
			reqB := false
			if j >= 0 {
				bn = b.obj.props[j].node
				reqB = b.obj.required[j>>6]&(1<<(uint(j)&63)) != 0
			} else if b.obj.npat == 0 {
				bn = b.obj.combos[0]
			}
			if bn == nil {
				continue
			}
			if reqA && bn.kind == kNever {
				return true
			}
			if reqA && reqB && disjoint(p.node, bn, depth+1) {
				return true
			}
		}
		for j, p := range b.obj.props {
			reqB := b.obj.required[j>>6]&(1<<(uint(j)&63)) != 0
			if !reqB {
				continue
			}
			i := a.obj.keys.lookup(appendJSONStringBody(nil, p.name))
			if i < 0 && a.obj.npat == 0 && a.obj.combos[0].kind == kNever {
				return true
			}
			if i >= 0 && a.obj.props[i].node.kind == kNever {
				return true
			}
		}
	case kNumber:
		x, y := a.num, b.num
		if x.hi != nil && y.lo != nil && (x.hi.Cmp(y.lo) < 0 || x.hi.Cmp(y.lo) == 0 && (x.hiEx || y.loEx)) {
			return true
		}
		if y.hi != nil && x.lo != nil && (y.hi.Cmp(x.lo) < 0 || y.hi.Cmp(x.lo) == 0 && (y.hiEx || x.loEx)) {
			return true
		}
	case kArray:
		x, y := a.arr, b.arr
		if x.maxItems < y.minItems || y.maxItems < x.minItems {
			return true
		}
		for i := int32(0); i < x.minItems && i < y.minItems && i < 8; i++ {
			if disjoint(x.itemNode(i), y.itemNode(i), depth+1) {
				return true
			}
		}
	case kString:
		x, y := a.str, b.str
		if x.maxLen < y.minLen || y.maxLen < x.minLen {
			return true
		}
	}
	return false
}

// litKind is the node kind a literal value would have.
func litKind(v any) nodeKind {
	switch v.(type) {
	case string:
		return kString
	case json.Number:
		return kNumber
	case *jsonObject:
		return kObject
	case []any:
		return kArray
	}
	return kLit // null, true, false
}

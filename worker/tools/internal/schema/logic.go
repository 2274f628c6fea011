package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The logical keywords that are not a plain conjunction: not, if/then/else,
// dependentSchemas (and schema-valued dependencies). Each becomes a group
// of alternatives, like anyOf, whose members are synthetic subschemas:
//
//	not S            ¬S, as a union of synthetic subschemas (negation)
//	if I then T else E   (I ∧ T) ∨ (¬I ∧ E)
//	dependentSchemas {k: S}   (k absent) ∨ (k present ∧ S)
//	oneOf [A, B] that may overlap   (A ∧ ¬B) ∨ (B ∧ ¬A)
//
// The decoder follows every alternative in parallel (one thread each) and
// drops those the output contradicts, so the branch of an if is chosen
// by the properties the if examines whenever they come, in whatever order
// the keys are written: exact without reordering the keys. Only some
// forms have an exact negation (negation lists them); an if whose
// condition does not is checked after generation instead (late).
//
// A synthetic subschema is an ordinary *jsonObject that uses keywords the
// compiler reads (type, required, properties, pattern-free strings) plus
// one private keyword, notEnumKW, "none of these values"; its pointer
// starts with the pointer of the subschema it came from and has a ~ step
// no real pointer has (real tokens escape ~ as ~0 or ~1). It is registered
// in the document's pointer index, so child() finds its parts, and
// validated by synthValid instead of the validator.

// notEnumKW is the private keyword of a synthetic subschema: the value is
// none of the listed values.
const notEnumKW = "~notEnum"

// maxNegationAlts bounds the alternatives one negation may produce.
const maxNegationAlts = 16

// maxLogicProduct bounds the product of the alternative counts of the
// logic groups of one conjunction: the decoder forks that many threads
// where the value begins. Past it, an if or a dependent schema is checked
// after generation and a not is handled as one without an exact negation.
const maxLogicProduct = 64

// addLogicGroup adds g to e when the product of alternatives stays within
// maxLogicProduct; false when it would not.
func addLogicGroup(e *expansion, g altGroup) bool {
	p := e.logicProduct
	if p == 0 {
		p = 1
	}
	if n := len(g.alts); n > 1 {
		p *= n
	}
	if p > maxLogicProduct {
		return false
	}
	e.logicProduct = p
	e.groups = append(e.groups, g)
	return true
}

// synthetic returns the synthetic subschema at ptr (made once), with the
// keywords kv (name, value pairs) and the subschemas also that hold
// alongside it. props maps property names to their synthetic or real
// subschemas.
func (c *schemaCompiler) synthetic(ptr string, from *sloc, kv []any, props map[string]*sloc, also ...*sloc) *sloc {
	if s, ok := c.doc.byPtr[ptr]; ok {
		return s
	}
	o := &jsonObject{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		o.keys = append(o.keys, k)
		o.vals[k] = kv[i+1]
	}
	if len(props) > 0 {
		po := &jsonObject{vals: map[string]any{}}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			po.keys = append(po.keys, k)
			po.vals[k] = true // read through child()
			c.doc.byPtr[ptr+"/properties/"+escapePtr(k)] = props[k]
		}
		o.keys = append(o.keys, "properties")
		o.vals["properties"] = po
	}
	s := &sloc{v: o, ptr: ptr, base: from.base, synth: true, also: also}
	c.doc.byPtr[ptr] = s
	return s
}

// falseAt returns the synthetic false subschema at ptr.
func (c *schemaCompiler) falseAt(ptr string, from *sloc) *sloc {
	if s, ok := c.doc.byPtr[ptr]; ok {
		return s
	}
	s := &sloc{v: false, ptr: ptr, base: from.base, synth: true}
	c.doc.byPtr[ptr] = s
	return s
}

// absent is the synthetic subschema "an object has no property k" (any
// other value passes).
func (c *schemaCompiler) absent(ptr string, from *sloc, k string) *sloc {
	f := c.falseAt(ptr+"/f", from)
	return c.synthetic(ptr, from, nil, map[string]*sloc{k: f})
}

// negation returns subschemas whose union is exactly the values s does
// not accept, or ok false when s has a keyword outside the forms handled:
// true and false, type, enum, const, required, properties (with negatable
// values), allOf, anyOf and $ref of those. Annotations are ignored.
func (c *schemaCompiler) negation(s *sloc, depth int) (alts []*sloc, ok bool) {
	if depth > 8 {
		return nil, false
	}
	base := s.ptr + "/~neg"
	switch v := s.v.(type) {
	case bool:
		if v {
			return nil, true
		}
		return []*sloc{c.synthetic(base, s, nil, nil)}, true
	case *jsonObject:
		if r, has := v.vals["$ref"].(string); has && c.doc.draft <= draft7 {
			t, err := c.doc.resolve(s, r)
			if err != nil {
				return nil, false
			}
			return c.negation(t, depth+1)
		}
		for _, k := range v.keys {
			if annotationKeyword(k) || k == "$defs" || k == "definitions" {
				continue
			}
			var more []*sloc
			switch k {
			case "type":
				names, exact := complementTypes(typeMask(v.vals[k]))
				if !exact {
					// Numbers that are not integers: the grammar allows
					// every number and the final validation checks.
					c.late(s, "not", "a number that is an integer is refused after generation")
					names = append(names, "number")
				}
				if len(names) > 0 {
					more = []*sloc{c.synthetic(base+"/type", s, []any{"type", names}, nil)}
				}
			case "enum", "const":
				vals, _ := v.vals[k].([]any)
				if k == "const" {
					vals = []any{v.vals[k]}
				}
				more = []*sloc{c.synthetic(base+"/"+k, s, []any{notEnumKW, vals}, nil)}
			case "required":
				req, _ := v.vals[k].([]any)
				// An object without one of them (required says nothing
				// of other values).
				for i, r := range req {
					name, _ := r.(string)
					p := base + "/required/" + strconv.Itoa(i)
					more = append(more, c.synthetic(p, s, []any{"type", "object"}, map[string]*sloc{name: c.falseAt(p+"/f", s)}))
				}
			case "properties":
				props, _ := v.vals[k].(*jsonObject)
				if props == nil {
					return nil, false
				}
				for _, name := range props.keys {
					ch := c.child(s, "properties", escapePtr(name))
					negs, ok := c.negation(ch, depth+1)
					if !ok {
						return nil, false
					}
					for i, n := range negs {
						p := fmt.Sprintf("%s/properties/%s/%d", base, escapePtr(name), i)
						more = append(more, c.synthetic(p, s, []any{"type", "object", "required", []any{name}}, map[string]*sloc{name: n}))
					}
				}
			case "allOf":
				list, _ := v.vals[k].([]any)
				for i := range list {
					negs, ok := c.negation(c.child(s, "allOf", strconv.Itoa(i)), depth+1)
					if !ok {
						return nil, false
					}
					more = append(more, negs...)
				}
			case "anyOf":
				// ¬(A ∨ B) = ¬A ∧ ¬B: every combination of one
				// alternative of each.
				list, _ := v.vals[k].([]any)
				combos := [][]*sloc{nil}
				for i := range list {
					negs, ok := c.negation(c.child(s, "anyOf", strconv.Itoa(i)), depth+1)
					if !ok {
						return nil, false
					}
					var next [][]*sloc
					for _, cb := range combos {
						for _, n := range negs {
							next = append(next, append(append([]*sloc(nil), cb...), n))
						}
					}
					if len(next) > maxNegationAlts {
						return nil, false
					}
					combos = next
				}
				for i, cb := range combos {
					more = append(more, c.synthetic(fmt.Sprintf("%s/anyOf/%d", base, i), s, nil, nil, cb...))
				}
			case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
				"minItems", "maxItems", "minProperties", "maxProperties":
				n, isNum := v.vals[k].(json.Number)
				if !isNum || c.doc.draft == draft4 && strings.HasPrefix(k, "exclusive") {
					return nil, false
				}
				more = c.negateBound(s, base, k, n, c.doc.draft == draft4 && (k == "minimum" && v.vals["exclusiveMinimum"] == true || k == "maximum" && v.vals["exclusiveMaximum"] == true))
			case "not":
				// ¬¬S is S.
				more = []*sloc{c.child(s, "not")}
			case "$ref":
				t, err := c.doc.resolve(s, v.vals[k].(string))
				if err != nil {
					return nil, false
				}
				negs, ok := c.negation(t, depth+1)
				if !ok {
					return nil, false
				}
				more = negs
			default:
				return nil, false
			}
			alts = append(alts, more...)
			if len(alts) > maxNegationAlts {
				return nil, false
			}
		}
		return alts, true
	}
	return nil, false
}

// boundKinds maps a bound keyword to the type it applies to, and the
// keyword that says the opposite (with the bound moved by one for counts).
var boundKinds = map[string]struct {
	typ      string
	opposite string
	shift    int64 // counts: the opposite bound is n+shift
}{
	"minimum":          {"number", "exclusiveMaximum", 0},
	"maximum":          {"number", "exclusiveMinimum", 0},
	"exclusiveMinimum": {"number", "maximum", 0},
	"exclusiveMaximum": {"number", "minimum", 0},
	"minLength":        {"string", "maxLength", -1},
	"maxLength":        {"string", "minLength", 1},
	"minItems":         {"array", "maxItems", -1},
	"maxItems":         {"array", "minItems", 1},
	"minProperties":    {"object", "maxProperties", -1},
	"maxProperties":    {"object", "minProperties", 1},
}

// negateBound returns the negation of the bound keyword k = n: a value of
// the type the bound applies to, beyond it (none when no such value is). exclusive
// is a draft 4 minimum/maximum made exclusive by its boolean sibling.
func (c *schemaCompiler) negateBound(s *sloc, base, k string, n json.Number, exclusive bool) []*sloc {
	bk := boundKinds[k]
	// A value of another type satisfies the bound: only values of its
	// type beyond it do not.
	var out []*sloc
	opp, val := bk.opposite, any(n)
	if c.doc.draft == draft4 && bk.typ == "number" {
		// Draft 4 spells an exclusive bound as a boolean beside it.
		switch k {
		case "minimum", "maximum":
			opp = map[string]string{"minimum": "maximum", "maximum": "minimum"}[k]
			if exclusive {
				return append(out, c.synthetic(base+"/"+k+"/beyond", s, []any{"type", bk.typ, opp, val}, nil))
			}
			ex := "exclusiveMaximum"
			if k == "maximum" {
				ex = "exclusiveMinimum"
			}
			return append(out, c.synthetic(base+"/"+k+"/beyond", s, []any{"type", bk.typ, opp, val, ex, true}, nil))
		}
	}
	if bk.shift != 0 {
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			return out
		}
		f, _ := r.Float64()
		var cnt int64
		if bk.shift < 0 {
			cnt = int64(math.Ceil(f)) - 1 // fewer than n
		} else {
			cnt = int64(math.Floor(f)) + 1 // more than n
		}
		if cnt < 0 {
			return out // nothing of that type is beyond
		}
		val = json.Number(strconv.FormatInt(cnt, 10))
	}
	return append(out, c.synthetic(base+"/"+k+"/beyond", s, []any{"type", bk.typ, opp, val}, nil))
}

// complementTypes names the JSON types outside mask; exact is false when
// the complement holds "numbers that are not integers", which no type
// names (they are then left out of names).
func complementTypes(mask uint8) (names []any, exact bool) {
	exact = !(mask&tInt != 0 && mask&tNum == 0)
	for _, t := range []struct {
		name string
		bits uint8
	}{{"null", tNull}, {"boolean", tBool}, {"object", tObj}, {"array", tArr}, {"string", tStr}, {"number", tNum | tInt}} {
		if mask&t.bits == 0 {
			names = append(names, t.name)
		}
	}
	return names, exact
}

// logicGroups adds to e the groups of alternatives of s's not, if/then/else
// and dependentSchemas (dependencies with schema values before 2019-09).
func (c *schemaCompiler) logicGroups(s *sloc, o *jsonObject, e *expansion) error {
	if _, ok := o.vals["not"]; ok {
		negs, exact := c.negation(c.child(s, "not"), 0)
		if !exact || !addLogicGroup(e, altGroup{owner: s, kw: "not", alts: negs}) {
			e.inexact = append(e.inexact, altGroup{owner: s, kw: "not"})
		}
	}
	if _, ok := o.vals["if"]; ok && c.doc.draft >= draft7 && (o.has("then") || o.has("else")) {
		ifLoc := c.child(s, "if")
		negs, exact := c.negation(ifLoc, 0)
		if !exact {
			e.inexact = append(e.inexact, altGroup{owner: s, kw: "if"})
		} else {
			g := altGroup{owner: s, kw: "if"}
			also := []*sloc{ifLoc}
			if o.has("then") {
				also = append(also, c.child(s, "then"))
			}
			g.alts = append(g.alts, c.synthetic(s.ptr+"/~then", s, nil, nil, also...))
			for i, n := range negs {
				also := []*sloc{n}
				if o.has("else") {
					also = append(also, c.child(s, "else"))
				}
				g.alts = append(g.alts, c.synthetic(s.ptr+"/~else/"+strconv.Itoa(i), s, nil, nil, also...))
			}
			if !addLogicGroup(e, g) {
				c.late(s, "if", "too many conditional alternatives in one schema to follow in the mask")
			}
		}
	}
	kw := "dependentSchemas"
	if c.doc.draft <= draft7 {
		kw = "dependencies"
	}
	if ds, ok := o.vals[kw].(*jsonObject); ok {
		for _, k := range ds.keys {
			switch dv := ds.vals[k].(type) {
			case []any:
				continue // dependentRequired form: objectDeps
			case bool:
				if dv {
					continue
				}
			}
			base := s.ptr + "/~" + kw + "/" + escapePtr(k)
			ch := c.child(s, kw, escapePtr(k))
			present := c.synthetic(base+"/present", s, []any{"required", []any{k}}, nil, ch)
			if !addLogicGroup(e, altGroup{owner: s, kw: kw, alts: []*sloc{c.absent(base+"/absent", s, k), present}}) {
				c.late(s, kw, fmt.Sprintf("too many conditional alternatives in one schema to follow in the mask, key %q", k))
			}
		}
	}
	return nil
}

// exclusiveAlts rewrites a oneOf whose branches may overlap as the
// alternatives "branch i and not each other branch", one synthetic
// subschema per choice of the negations' alternatives; ok is false when a
// branch does not negate or the alternatives would be more than
// maxLogicProduct.
func (c *schemaCompiler) exclusiveAlts(g altGroup) (out []*sloc, ok bool) {
	negs := make([][]*sloc, len(g.alts))
	for j, b := range g.alts {
		n, exact := c.negation(b, 0)
		if !exact {
			return nil, false
		}
		negs[j] = n
	}
	for i, b := range g.alts {
		combos := [][]*sloc{{b}}
		for j := range g.alts {
			if j == i {
				continue
			}
			var next [][]*sloc
			for _, cb := range combos {
				for _, n := range negs[j] {
					next = append(next, append(append([]*sloc(nil), cb...), n))
				}
			}
			combos = next
			if len(out)+len(combos) > maxLogicProduct {
				return nil, false
			}
		}
		for k, cb := range combos {
			out = append(out, c.synthetic(fmt.Sprintf("%s/~oneOf/%d/%d", g.owner.ptr, i, k), g.owner, nil, nil, cb...))
		}
	}
	return out, true
}

// inexactKeywords handles the not and if of e that have no exact
// negation, once e is known not to be a finite set of values (those are
// filtered by the validator, exactly): not is unsupported, if is checked
// after generation.
func (c *schemaCompiler) inexactKeywords(e *expansion) error {
	for _, g := range e.inexact {
		switch g.kw {
		case "not":
			if err := c.unsupported(g.owner, "not", "only not with type, enum, const, required, properties, allOf, anyOf, not or $ref of those is supported"); err != nil {
				return err
			}
		case "if":
			c.late(g.owner, "if", "its condition has no exact negation")
		}
	}
	return nil
}

// late records keyword kw at s as checked by the final validation only:
// the grammar does not enforce it, so an output may be refused at the end.
// Strict mode too compiles it; the note is reported.
func (c *schemaCompiler) late(s *sloc, kw, why string) {
	note := fmt.Sprintf("%s at %s (checked after generation: %s)", kw, ptrOrRoot(s.ptr), why)
	if c.noted[note] {
		return
	}
	c.noted[note] = true
	c.notes = append(c.notes, note)
}

// synthValid reports whether v (a decoded JSON value) satisfies the
// synthetic subschema s, not counting its also members (they are members
// of the conjunction themselves).
func (c *schemaCompiler) synthValid(s *sloc, v any) (bool, error) {
	switch t := s.v.(type) {
	case bool:
		return t, nil
	case *jsonObject:
		if tv, ok := t.vals["type"]; ok && !typeAccepts(typeMask(tv), v) {
			return false, nil
		}
		if ne, ok := t.vals[notEnumKW].([]any); ok {
			k := valueKey(v)
			for _, x := range ne {
				if valueKey(x) == k {
					return false, nil
				}
			}
		}
		if !boundsHold(t, v, c.doc.draft) {
			return false, nil
		}
		ov, isObj := v.(*jsonObject)
		if !isObj {
			return true, nil
		}
		if req, ok := t.vals["required"].([]any); ok {
			for _, r := range req {
				if name, _ := r.(string); !ov.has(name) {
					return false, nil
				}
			}
		}
		if props, ok := t.vals["properties"].(*jsonObject); ok {
			for _, name := range props.keys {
				pv, has := ov.vals[name]
				if !has {
					continue
				}
				ok, err := c.locValid(c.child(s, "properties", escapePtr(name)), pv)
				if err != nil || !ok {
					return false, err
				}
			}
		}
		return true, nil
	}
	return false, nil
}

// locValid reports whether v satisfies the subschema s and what s brings
// along (also).
func (c *schemaCompiler) locValid(s *sloc, v any) (bool, error) {
	if s.synth {
		ok, err := c.synthValid(s, v)
		if err != nil || !ok {
			return false, err
		}
		for _, a := range s.also {
			if ok, err := c.locValid(a, v); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
	sch, err := c.val.at(s.ptr)
	if err != nil {
		return false, &Error{path: ptrOrRoot(s.ptr), msg: "validator cannot compile this subschema: " + err.Error()}
	}
	return sch.Validate(toPlain(v)) == nil, nil
}

// boundsHold checks the bound keywords a synthetic subschema o uses
// (negateBound) against v.
func boundsHold(o *jsonObject, v any, draft int) bool {
	size := -1
	var num *big.Rat
	switch t := v.(type) {
	case string:
		size = utf8.RuneCountInString(t)
	case []any:
		size = len(t)
	case *jsonObject:
		size = len(t.keys)
	case json.Number:
		num, _ = new(big.Rat).SetString(string(t))
	}
	for k, bk := range boundKinds {
		b, ok := o.vals[k].(json.Number)
		if !ok {
			continue
		}
		r, ok := new(big.Rat).SetString(string(b))
		if !ok {
			continue
		}
		if bk.typ == "number" {
			if num == nil {
				continue
			}
			cmp := num.Cmp(r)
			exclusive := strings.HasPrefix(k, "exclusive")
			if draft == draft4 {
				exclusive = k == "minimum" && o.vals["exclusiveMinimum"] == true || k == "maximum" && o.vals["exclusiveMaximum"] == true
			}
			lower := k == "minimum" || k == "exclusiveMinimum"
			switch {
			case lower && (cmp < 0 || exclusive && cmp == 0):
				return false
			case !lower && (cmp > 0 || exclusive && cmp == 0):
				return false
			}
			continue
		}
		if size < 0 || typeBits(bk.typ) != typeBitsOfSized(v) {
			continue
		}
		if strings.HasPrefix(k, "min") && r.Cmp(big.NewRat(int64(size), 1)) > 0 || strings.HasPrefix(k, "max") && r.Cmp(big.NewRat(int64(size), 1)) < 0 {
			return false
		}
	}
	return true
}

// typeBitsOfSized is the type bit of a string, array or object.
func typeBitsOfSized(v any) uint8 {
	switch v.(type) {
	case string:
		return tStr
	case []any:
		return tArr
	case *jsonObject:
		return tObj
	}
	return 0
}

// typeAccepts reports whether v is of a type in mask.
func typeAccepts(mask uint8, v any) bool {
	switch t := v.(type) {
	case nil:
		return mask&tNull != 0
	case bool:
		return mask&tBool != 0
	case string:
		return mask&tStr != 0
	case *jsonObject:
		return mask&tObj != 0
	case []any:
		return mask&tArr != 0
	case json.Number:
		if mask&tNum != 0 {
			return true
		}
		r, ok := new(big.Rat).SetString(string(t))
		return ok && r.IsInt() && mask&tInt != 0
	}
	return false
}

// notInPattern returns a regular expression (for a full match) of every
// string but the listed ones.
func notInPattern(words []string) string {
	type node struct {
		end  bool
		next map[rune]*node
	}
	root := &node{next: map[rune]*node{}}
	for _, w := range words {
		n := root
		for _, r := range w {
			if n.next[r] == nil {
				n.next[r] = &node{next: map[rune]*node{}}
			}
			n = n.next[r]
		}
		n.end = true
	}
	var rec func(n *node) string
	rec = func(n *node) string {
		var alts []string
		if !n.end {
			alts = append(alts, "")
		}
		rs := make([]rune, 0, len(n.next))
		for r := range n.next {
			rs = append(rs, r)
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
		if len(rs) == 0 {
			alts = append(alts, "(?s:.+)")
		} else {
			var cls strings.Builder
			cls.WriteString("[^")
			for _, r := range rs {
				fmt.Fprintf(&cls, `\x{%x}`, r)
			}
			cls.WriteString("](?s:.*)")
			alts = append(alts, cls.String())
		}
		for _, r := range rs {
			alts = append(alts, regexp.QuoteMeta(string(r))+"(?:"+rec(n.next[r])+")")
		}
		return strings.Join(alts, "|")
	}
	return "(?:" + rec(root) + ")"
}

// stringsOf returns the strings among vals.
func stringsOf(vals []any) []string {
	var out []string
	for _, v := range vals {
		if s, ok := v.(string); ok && utf8.ValidString(s) {
			out = append(out, s)
		}
	}
	return out
}

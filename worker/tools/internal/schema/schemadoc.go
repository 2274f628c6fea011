package schema

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// A JSON Schema document, indexed for reference resolution: every
// subschema by its JSON pointer, every resource by its absolute URI ($id),
// every $anchor. Only references inside the document resolve; a request's
// schema must be self-contained.

// Drafts, by the year-ish number of their $schema.
const (
	draft4    = 4
	draft6    = 6
	draft7    = 7
	draft2019 = 2019
	draft2020 = 2020
)

// defaultBase is the base URI of a schema without $id.
const defaultBase = "https://schema.zerolayer.invalid/root.json"

// sloc is one subschema: its value, its JSON pointer from the document
// root, and the base URI in effect there.
type sloc struct {
	v    any
	ptr  string
	base *url.URL
	// synth marks a subschema the compiler made (logic.go); also are the
	// subschemas that hold alongside it.
	synth bool
	also  []*sloc
}

type schemaDoc struct {
	root    any
	rootURL string // the URL the validator knows the document by
	draft   int
	byPtr   map[string]*sloc
	byURI   map[string]string // resource URI without fragment -> pointer
	anchors map[string]string // URI#anchor -> pointer
}

// draftOf reads $schema; unknown or absent means 2020-12.
func draftOf(root any) int {
	o, ok := root.(*jsonObject)
	if !ok {
		return draft2020
	}
	s, _ := o.vals["$schema"].(string)
	switch {
	case strings.Contains(s, "draft-04"):
		return draft4
	case strings.Contains(s, "draft-06"):
		return draft6
	case strings.Contains(s, "draft-07"):
		return draft7
	case strings.Contains(s, "2019-09"):
		return draft2019
	}
	return draft2020
}

func newSchemaDoc(root any) (*schemaDoc, error) {
	d := &schemaDoc{
		root:    root,
		draft:   draftOf(root),
		byPtr:   map[string]*sloc{},
		byURI:   map[string]string{},
		anchors: map[string]string{},
	}
	base, _ := url.Parse(defaultBase)
	d.rootURL = defaultBase
	if o, ok := root.(*jsonObject); ok {
		if id, ok := o.vals[d.idKeyword()].(string); ok && !strings.HasPrefix(id, "#") {
			u, err := base.Parse(id)
			if err == nil {
				u.Fragment = ""
				d.rootURL = u.String()
			}
		}
	}
	d.byURI[defaultBase] = ""
	if err := d.index(root, "", base, 0); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *schemaDoc) idKeyword() string {
	if d.draft == draft4 {
		return "id"
	}
	return "$id"
}

// Keywords whose value is one subschema, an array of them, or a map of them.
var (
	kwSchema = []string{"not", "if", "then", "else", "additionalProperties", "additionalItems",
		"contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema"}
	kwSchemaArray = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	kwSchemaMap   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

// escapePtr escapes one JSON pointer token.
func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func (d *schemaDoc) index(v any, ptr string, base *url.URL, depth int) error {
	if depth > maxJSONDepth {
		return &Error{path: ptr, msg: "schema nests too deeply"}
	}
	o, ok := v.(*jsonObject)
	if !ok {
		d.byPtr[ptr] = &sloc{v: v, ptr: ptr, base: base}
		return nil
	}
	if id, ok := o.vals[d.idKeyword()].(string); ok {
		u, err := base.Parse(id)
		if err == nil {
			if strings.HasPrefix(id, "#") && d.draft <= draft7 {
				// A plain-name fragment $id is an anchor in drafts 4-7.
				d.anchors[base.String()+id] = ptr
			} else {
				frag := u.Fragment
				u.Fragment = ""
				base = u
				d.byURI[u.String()] = ptr
				if frag != "" && !strings.HasPrefix(frag, "/") {
					d.anchors[u.String()+"#"+frag] = ptr
				}
			}
		}
	}
	if a, ok := o.vals["$anchor"].(string); ok {
		d.anchors[base.String()+"#"+a] = ptr
	}
	if a, ok := o.vals["$dynamicAnchor"].(string); ok {
		d.anchors[base.String()+"#"+a] = ptr
	}
	d.byPtr[ptr] = &sloc{v: v, ptr: ptr, base: base}
	for _, k := range kwSchema {
		if s, ok := o.vals[k]; ok {
			if err := d.index(s, ptr+"/"+escapePtr(k), base, depth+1); err != nil {
				return err
			}
		}
	}
	for _, k := range kwSchemaArray {
		if a, ok := o.vals[k].([]any); ok {
			for i, s := range a {
				if err := d.index(s, ptr+"/"+k+"/"+strconv.Itoa(i), base, depth+1); err != nil {
					return err
				}
			}
		}
	}
	switch it := o.vals["items"].(type) {
	case []any:
		for i, s := range it {
			if err := d.index(s, ptr+"/items/"+strconv.Itoa(i), base, depth+1); err != nil {
				return err
			}
		}
	case nil:
	default:
		if err := d.index(it, ptr+"/items", base, depth+1); err != nil {
			return err
		}
	}
	for _, k := range kwSchemaMap {
		if m, ok := o.vals[k].(*jsonObject); ok {
			for _, name := range m.keys {
				if err := d.index(m.vals[name], ptr+"/"+escapePtr(k)+"/"+escapePtr(name), base, depth+1); err != nil {
					return err
				}
			}
		}
	}
	if m, ok := o.vals["dependencies"].(*jsonObject); ok {
		for _, name := range m.keys {
			if _, isArr := m.vals[name].([]any); !isArr {
				if err := d.index(m.vals[name], ptr+"/dependencies/"+escapePtr(name), base, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// resolve finds the subschema ref points to from s.
func (d *schemaDoc) resolve(s *sloc, ref string) (*sloc, error) {
	u, err := s.base.Parse(ref)
	if err != nil {
		return nil, &Error{keyword: "$ref", path: s.ptr, msg: fmt.Sprintf("invalid reference %q: %v", ref, err)}
	}
	frag := u.Fragment
	u.Fragment = ""
	resPtr, ok := d.byURI[u.String()]
	if !ok {
		return nil, &Error{keyword: "$ref", path: s.ptr, msg: fmt.Sprintf("reference %q is not inside the schema (remote references are not supported)", ref)}
	}
	var target string
	switch {
	case frag == "":
		target = resPtr
	case strings.HasPrefix(frag, "/"):
		target = resPtr + frag
	default:
		p, ok := d.anchors[u.String()+"#"+frag]
		if !ok {
			return nil, &Error{keyword: "$ref", path: s.ptr, msg: fmt.Sprintf("anchor %q not found", frag)}
		}
		target = p
	}
	if t, ok := d.byPtr[target]; ok {
		return t, nil
	}
	// A pointer into a place the index did not walk (an unknown keyword):
	// evaluate it on the document.
	v, ok := d.evalPtr(target)
	if !ok {
		return nil, &Error{keyword: "$ref", path: s.ptr, msg: fmt.Sprintf("reference %q points nowhere", ref)}
	}
	base := s.base
	if r, ok := d.byPtr[resPtr]; ok {
		base = r.base
	}
	t := &sloc{v: v, ptr: target, base: base}
	if err := d.index(v, target, base, 0); err != nil {
		return nil, err
	}
	if t2, ok := d.byPtr[target]; ok {
		return t2, nil
	}
	return t, nil
}

// evalPtr evaluates a JSON pointer on the document.
func (d *schemaDoc) evalPtr(ptr string) (any, bool) {
	v := d.root
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unescapePtr(tok)
		switch t := v.(type) {
		case *jsonObject:
			x, ok := t.vals[tok]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

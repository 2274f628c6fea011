package contracts

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The JSON Schemas in schema/ are generated from the Go types by reflection,
// with descriptions taken from the Go doc comments. TestSchemasMatchGoTypes
// fails when a committed schema differs from what the Go types give; run
//
//	go test ./contracts -run TestSchemasMatchGoTypes -update
//
// to rewrite them.

// schemaRoot is one generated schema file.
type schemaRoot struct {
	file     string
	typ      reflect.Type
	nullable bool // optional fields also accept null (messages clients write)
	extra    func(s map[string]any)
}

var schemaRoots = []schemaRoot{
	{"job_request.json", reflect.TypeFor[JobRequest](), true, jobRequestConditions},
	{"event.json", reflect.TypeFor[Event](), false, eventConditions},
	{"result.json", reflect.TypeFor[Result](), false, resultConditions},
	{"usage.json", reflect.TypeFor[Usage](), false, nil},
	{"dlq_record.json", reflect.TypeFor[DLQRecord](), false, nil},
	{"tenant_limits.json", reflect.TypeFor[TenantLimits](), false, nil},
	{"worker_info.json", reflect.TypeFor[WorkerInfo](), false, nil},
	{"model_record.json", reflect.TypeFor[ModelRecord](), false, nil},
}

// enumTypes are the closed sets of values; their values are the string
// constants of each type declared in the package (read from the source by
// goConsts), so a constant added in Go reaches the schema. Open sets (Code,
// ToolCode, ToolAction) stay plain strings so that readers accept values
// added later.
var enumTypes = []reflect.Type{
	reflect.TypeFor[Priority](),
	reflect.TypeFor[Bucket](),
	reflect.TypeFor[Role](),
	reflect.TypeFor[Preset](),
	reflect.TypeFor[ResponseFormatType](),
	reflect.TypeFor[ToolName](),
	reflect.TypeFor[ToolMode](),
	reflect.TypeFor[OnToolFailure](),
	reflect.TypeFor[EventType](),
	reflect.TypeFor[StopReason](),
	reflect.TypeFor[ResultStatus](),
	reflect.TypeFor[JobKind](),
	reflect.TypeFor[ToolStatus](),
}

func strs[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}

// eventConditions adds the per-type requirements of eventRequired, and the
// delta rule of Event.Validate.
func eventConditions(s map[string]any) {
	var all []any
	for _, typ := range EventTypes() {
		var then map[string]any
		switch req := eventRequired[typ]; {
		case typ == EventDelta:
			then = map[string]any{"anyOf": []any{
				map[string]any{"required": []string{"text"}},
				map[string]any{"required": []string{"token_ids"}},
			}}
		case typ == EventFinal:
			// stop_reason, except in an embedding job's final event.
			then = map[string]any{"required": []string{"usage"}, "anyOf": []any{
				map[string]any{"required": []string{"stop_reason"}},
				map[string]any{"properties": map[string]any{"usage": map[string]any{
					"required": []string{"kind"}, "properties": map[string]any{"kind": map[string]any{"const": string(KindEmbedding)}}}}},
			}}
		case len(req) > 0:
			then = map[string]any{"required": req}
		default:
			continue
		}
		all = append(all, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": string(typ)}}},
			"then": then,
		})
	}
	s["allOf"] = all
}

// jobRequestConditions: a job has messages (a generation) or embedding.
func jobRequestConditions(s map[string]any) {
	s["anyOf"] = []any{
		map[string]any{"required": []string{"messages"}},
		map[string]any{"required": []string{"embedding"}},
	}
}

// resultConditions mirrors Result.Validate's per-status rules.
func resultConditions(s map[string]any) {
	cond := func(statuses []string, required string) map[string]any {
		return map[string]any{
			"if":   map[string]any{"properties": map[string]any{"status": map[string]any{"enum": statuses}}},
			"then": map[string]any{"required": []string{required}},
		}
	}
	s["allOf"] = []any{
		map[string]any{
			"if": map[string]any{"properties": map[string]any{"status": map[string]any{"const": string(StatusCompleted)}}},
			"then": map[string]any{"anyOf": []any{
				map[string]any{"required": []string{"stop_reason"}},
				map[string]any{"required": []string{"embeddings"}},
			}},
		},
		cond([]string{string(StatusFailed), string(StatusCanceled)}, "error"),
	}
}

// schemaGen builds one schema document.
type schemaGen struct {
	docs     map[string]string
	enums    map[reflect.Type][]string
	defs     map[string]any
	nullable bool
}

func (g *schemaGen) root(r schemaRoot) map[string]any {
	s := g.object(r.typ)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = schemaID(r.file)
	s["title"] = r.typ.Name()
	if len(g.defs) > 0 {
		s["$defs"] = g.defs
	}
	if r.extra != nil {
		r.extra(s)
	}
	return s
}

func schemaID(file string) string {
	return "urn:zerolayer:contract:" + ContractVersion + ":" + strings.TrimSuffix(file, ".json")
}

// object returns the schema of struct type t.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range jsonFields(t) {
		p := g.of(f.typ)
		if f.omitempty && g.nullable {
			p = nullable(p)
		}
		if d := g.docs[t.Name()+"."+f.goName]; d != "" {
			p["description"] = d
		}
		props[f.name] = p
		if !f.omitempty {
			required = append(required, f.name)
		}
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if d := g.docs[t.Name()]; d != "" {
		s["description"] = d
	}
	return s
}

// of returns the schema of any contract type.
func (g *schemaGen) of(t reflect.Type) map[string]any {
	switch {
	case t == rawMessageType:
		return map[string]any{}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == vectorType:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case t == embedInputType:
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "string"},
			map[string]any{"type": "array", "items": map[string]any{"type": "integer", "minimum": 0}},
		}}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	}
	if vals, ok := g.enums[t]; ok {
		return map[string]any{"type": "string", "enum": vals}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Struct:
		if _, done := g.defs[t.Name()]; !done {
			g.defs[t.Name()] = nil // reserve the name before recursing
			g.defs[t.Name()] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	}
	panic("schema: no JSON Schema for " + t.String())
}

// nullable lets a schema also accept null.
func nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		s["type"] = []string{typ, "null"}
		if enum, ok := s["enum"].([]string); ok {
			vals := make([]any, 0, len(enum)+1)
			for _, v := range enum {
				vals = append(vals, v)
			}
			s["enum"] = append(vals, nil)
		}
		return s
	}
	if len(s) == 0 { // any value, null included
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

var docLink = regexp.MustCompile(`\[\*?([A-Za-z][A-Za-z0-9_.]*)\]`)

// parseSources parses the package's non-test Go files.
func parseSources(t *testing.T) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// goConsts returns, per type name, the values of the string constants
// declared with that type, in declaration order.
func goConsts(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range parseSources(t) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[typ.Name] = append(out[typ.Name], s)
				}
			}
		}
	}
	return out
}

// goEnums maps each enum type to its constants' values.
func goEnums(t *testing.T) map[reflect.Type][]string {
	t.Helper()
	consts := goConsts(t)
	out := map[reflect.Type][]string{}
	for _, typ := range enumTypes {
		vals := consts[typ.Name()]
		if len(vals) == 0 {
			t.Fatalf("no constants of enum type %s", typ.Name())
		}
		out[typ] = vals
	}
	return out
}

// TestEnumListsMatchConstants checks that the functions listing a type's
// values return every constant of the type, in declaration order.
func TestEnumListsMatchConstants(t *testing.T) {
	t.Parallel()
	consts := goConsts(t)
	lists := map[string][]string{
		"Priority":     strs(Priorities()),
		"Bucket":       strs(AllBuckets()),
		"Preset":       strs(Presets()),
		"ToolName":     strs(ToolNames()),
		"EventType":    strs(EventTypes()),
		"ResultStatus": strs(ResultStatuses()),
		"StopReason":   strs(StopReasons()),
		"Code":         strs(codes()),
	}
	for name, list := range lists {
		if !slices.Equal(list, consts[name]) {
			t.Errorf("%s: list %v, constants %v", name, list, consts[name])
		}
	}
}

func codes() []Code {
	var out []Code
	for _, c := range Codes() {
		out = append(out, c.Code)
	}
	return out
}

// goDocs reads the doc comments of the package's types and struct fields:
// "Type" and "Type.Field" to one line of text.
func goDocs(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	clean := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		return docLink.ReplaceAllString(s, "$1")
	}
	for _, f := range parseSources(t) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if doc != nil {
					docs[ts.Name.Name] = clean(doc.Text())
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, field := range st.Fields.List {
					if field.Doc == nil {
						continue
					}
					for _, n := range field.Names {
						docs[ts.Name.Name+"."+n.Name] = clean(field.Doc.Text())
					}
				}
			}
		}
	}
	return docs
}

func generateSchema(t *testing.T, r schemaRoot, docs map[string]string, enums map[reflect.Type][]string) []byte {
	t.Helper()
	g := &schemaGen{docs: docs, enums: enums, defs: map[string]any{}, nullable: r.nullable}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep <job_id> readable in descriptions
	enc.SetIndent("", "  ")
	if err := enc.Encode(g.root(r)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSchemasMatchGoTypes(t *testing.T) {
	docs, enums := goDocs(t), goEnums(t)
	for _, r := range schemaRoots {
		path := filepath.Join("schema", r.file)
		got := generateSchema(t, r, docs, enums)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: the Go types give a different schema; run go test ./contracts -run TestSchemasMatchGoTypes -update and review the diff", path)
		}
	}
}

// compileSchemas compiles the committed schemas with no loader, so that a
// schema that refers outside itself fails.
func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertFormat()
	out := map[string]*jsonschema.Schema{}
	for _, r := range schemaRoots {
		f, err := os.Open(filepath.Join("schema", r.file))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", r.file, err)
		}
		if err := c.AddResource(schemaID(r.file), doc); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range schemaRoots {
		s, err := c.Compile(schemaID(r.file))
		if err != nil {
			t.Fatalf("compile %s: %v", r.file, err)
		}
		out[r.file] = s
	}
	return out
}

func validateJSON(t *testing.T, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(doc)
}

func TestSchemasAcceptFixtures(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	for _, fx := range fixtures {
		if err := validateJSON(t, schemas[fx.schema], readFixture(t, fx.file)); err != nil {
			t.Errorf("%s does not match schema/%s: %v", fx.file, fx.schema, err)
		}
	}
}

func TestSchemasRejectBrokenMessages(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	tests := []struct {
		name, schema, json string
	}{
		{"unknown request field", "job_request.json", `{"model":"m","messages":[{"role":"user","content":"x"}],"temprature":1}`},
		{"request without messages", "job_request.json", `{"model":"m"}`},
		{"bad priority", "job_request.json", `{"model":"m","messages":[{"role":"user","content":"x"}],"priority":"urgent"}`},
		{"bad tool name", "job_request.json", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"name":"shell"}]}`},
		{"string max_tokens", "job_request.json", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":"10"}`},
		{"final without usage", "event.json", `{"type":"final","job_id":"j","tenant":"t","seq":2,"attempt":1,"time":"2026-01-01T00:00:00Z","stop_reason":"end_turn"}`},
		{"delta without payload", "event.json", `{"type":"delta","job_id":"j","tenant":"t","seq":2,"attempt":1,"time":"2026-01-01T00:00:00Z"}`},
		{"event bad time", "event.json", `{"type":"started","job_id":"j","tenant":"t","seq":1,"attempt":1,"time":"yesterday"}`},
		{"failed result without error", "result.json", `{"job_id":"j","tenant":"t","status":"failed","attempt":1,"finished_at":"2026-01-01T00:00:00Z"}`},
		{"usage missing field", "usage.json", `{"job_id":"j"}`},
		{"dlq record renamed field", "dlq_record.json", `{"job_id":"j","tenant":"t","priority":"low","bucket":"long","reason":"internal","message":"","deliveries":5,"time":"2026-01-01T00:00:00Z"}`},
	}
	for _, tt := range tests {
		if err := validateJSON(t, schemas[tt.schema], []byte(tt.json)); err == nil {
			t.Errorf("%s: schema/%s accepted %s", tt.name, tt.schema, tt.json)
		}
	}
}

// TestSchemaAgreesWithDecoder checks that requests the schema accepts for
// their shape are not rejected by DecodeJobRequest for their shape, and the
// other way round, on a few edge cases (nulls, nested unknown fields).
func TestSchemaAgreesWithDecoder(t *testing.T) {
	t.Parallel()
	schema := compileSchemas(t)["job_request.json"]
	tests := []struct {
		json string
		ok   bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":null,"tools":null,"memory":null,"priority":null}`, true},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"memory":{"max_memory_mb":1,"extra":true}}`, false},
		{`{"model":"m","messages":[{"role":"user","content":"x","name":"bob"}]}`, false},
		{`{"model":"m","messages":[null]}`, false},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"seed":-1}`, false},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{"k":1}}`, false},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"name":"suffix","params":{"text":"!"},"mode":null}]}`, true},
	}
	for _, tt := range tests {
		schemaErr := validateJSON(t, schema, []byte(tt.json))
		_, decErr := DecodeJobRequest([]byte(tt.json), Limits{})
		if (schemaErr == nil) != tt.ok || (decErr == nil) != tt.ok {
			t.Errorf("%s: schema error %v, decode error %v; want ok=%v", tt.json, schemaErr, decErr, tt.ok)
		}
	}
}

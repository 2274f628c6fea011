package contracts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DecodeJobRequest decodes and validates an untrusted job request. In order
// it rejects:
//   - more than lim.MaxRequestBytes bytes (request_too_large);
//   - anything but one well-formed UTF-8 JSON object (malformed_json);
//   - fields the contract does not define, at any depth (invalid_request,
//     unless lim.AllowUnknownFields), and values of the wrong JSON type
//     (invalid_request), each with its field path;
//   - every problem Validate finds.
//
// JSON null is accepted for an optional field and means unset. On success
// the request has ApplyDefaults applied. On failure the error is a
// *ValidationError listing every problem found at the stage that failed;
// the request is nil. DecodeJobRequest never panics.
func DecodeJobRequest(b []byte, lim Limits) (*JobRequest, error) {
	lim = lim.WithDefaults()
	var r JobRequest
	if err := decodeMessage(b, &r, "request", lim.MaxRequestBytes, shapeRules{strict: !lim.AllowUnknownFields}); err != nil {
		return nil, err
	}
	r.dropNulls()
	if err := r.Validate(lim); err != nil {
		return nil, err
	}
	r.ApplyDefaults(lim)
	return &r, nil
}

// shapeRules says how strictly decodeMessage compares a document with its
// Go type.
type shapeRules struct {
	// strict rejects fields the type does not define, at any depth.
	strict bool
	// required rejects a top-level field without omitempty that is absent
	// (a record whose contract says every such field is always present).
	required bool
}

// decodeMessage is the one decoder of untrusted wire messages: it checks
// the size, that b is one well-formed UTF-8 JSON object, and its shape
// against dst's type under rules (wrong JSON types, unknown and missing
// fields, each with its path), then decodes it into dst, a pointer to a
// contract struct. what names the message in errors. Every failure is a
// *ValidationError.
func decodeMessage(b []byte, dst any, what string, maxBytes int, rules shapeRules) error {
	if len(b) > maxBytes {
		return asValidationError(NewError(CodeRequestTooLarge, "%s is %d bytes, above the limit of %d", what, len(b), maxBytes))
	}
	tree, err := parseJSON(b, what)
	if err != nil {
		return asValidationError(err)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return asValidationError(NewError(CodeMalformedJSON, "a %s must be a JSON object, not %s", what, jsonKind(tree)))
	}
	t := reflect.TypeOf(dst).Elem()
	var ps problems
	if rules.required {
		for _, f := range jsonFields(t) {
			if _, present := m[f.name]; !present && !f.omitempty {
				ps.add(CodeInvalidRequest, f.name, "is missing")
			}
		}
	}
	checkShape(tree, t, "", true, rules.strict, &ps)
	if err := ps.err(); err != nil {
		return err
	}
	if err := json.Unmarshal(b, dst); err != nil {
		// checkShape accepted the document, so this is a gap in checkShape.
		return asValidationError(NewError(CodeInvalidRequest, "%s does not decode: %v", what, err))
	}
	return nil
}

// dropNulls turns the raw JSON nulls that encoding/json keeps in
// json.RawMessage fields into absent values, as null means unset.
func (r *JobRequest) dropNulls() {
	if rf := r.ResponseFormat; rf != nil && isJSONNull(rf.Schema) {
		rf.Schema = nil
	}
	for i := range r.Tools {
		for k, v := range r.Tools[i].Params {
			if isJSONNull(v) {
				delete(r.Tools[i].Params, k)
			}
		}
	}
}

// parseJSON decodes one JSON value with numbers kept as json.Number; what
// names the message in errors.
func parseJSON(b []byte, what string) (any, error) {
	if !utf8.Valid(b) {
		return nil, NewError(CodeMalformedJSON, "%s is not valid UTF-8", what)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, malformed(err, what)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, NewError(CodeMalformedJSON, "unexpected data after the JSON value at byte %d", dec.InputOffset())
	}
	return v, nil
}

func malformed(err error, what string) *Error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return NewError(CodeMalformedJSON, "%v (at byte %d)", se, se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return NewError(CodeMalformedJSON, "%s is empty or truncated", what)
	}
	return NewError(CodeMalformedJSON, "%v", err)
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	embedInputType = reflect.TypeFor[EmbeddingInput]()
	vectorType     = reflect.TypeFor[Vector]()
)

// checkShape compares a decoded JSON value with the Go type it will be
// decoded into and records every unknown field (when strict) and every
// value of the wrong JSON type, with its path. optional says whether null
// is acceptable at this place.
func checkShape(v any, t reflect.Type, path string, optional, strict bool, ps *problems) {
	if v == nil {
		if !optional && t != rawMessageType {
			ps.add(CodeInvalidRequest, path, "must not be null")
		}
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(want string) {
		ps.add(CodeInvalidRequest, path, "must be %s, not %s", want, jsonKind(v))
	}
	switch {
	case t == rawMessageType:
		return
	case t == embedInputType:
		checkEmbeddingInputShape(v, path, ps)
		return
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			wrong("an RFC 3339 time string")
			return
		}
		var tm time.Time
		if err := tm.UnmarshalText([]byte(s)); err != nil {
			ps.add(CodeInvalidRequest, path, "%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrong("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			wrong("a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			wrong("an integer")
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			ps.add(CodeInvalidRequest, path, "%s is not an integer in range", n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			wrong("a non-negative integer")
			return
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			ps.add(CodeInvalidRequest, path, "%s is not a non-negative integer below 2^%d", n, t.Bits())
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			wrong("a number")
			return
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			ps.add(CodeInvalidRequest, path, "%s is out of range", n)
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			wrong("an array")
			return
		}
		for i, e := range a {
			checkShape(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), false, strict, ps)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		for _, k := range sortedKeys(m) {
			checkShape(m[k], t.Elem(), join(path, k), false, strict, ps)
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		fields := jsonFields(t)
		for _, f := range fields {
			if fv, present := m[f.name]; present {
				checkShape(fv, f.typ, join(path, f.name), f.omitempty, strict, ps)
			}
		}
		if strict {
			for _, k := range sortedKeys(m) {
				if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == k }) {
					ps.add(CodeInvalidRequest, join(path, k), "unknown field %q", k)
				}
			}
		}
	default:
		// Every type in the contract is covered above.
		ps.add(CodeInternal, path, "contracts: no shape check for %v", t)
	}
}

// jsonField is one JSON-visible field of a struct.
type jsonField struct {
	name      string
	goName    string
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists the JSON fields of struct type t in declaration order.
// The contract's structs embed nothing, so anonymous fields are not
// handled.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		out = append(out, jsonField{
			name:      name,
			goName:    sf.Name,
			typ:       sf.Type,
			omitempty: slices.Contains(strings.Split(opts, ","), "omitempty"),
		})
	}
	return out
}

// join appends a field name to a JSON path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}

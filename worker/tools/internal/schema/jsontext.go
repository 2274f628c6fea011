package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON values as this package reads them: nil, bool, json.Number, string,
// []any and *jsonObject, which keeps its keys in document order (JSON
// Schema's properties order, and the order a literal is written in).

// jsonObject is a JSON object with its keys in document order. A key that
// appears twice keeps its last value, as encoding/json does.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func (o *jsonObject) has(k string) bool {
	_, ok := o.vals[k]
	return ok
}

// DecodeJSON parses one JSON value from data, with numbers as json.Number
// and objects as *jsonObject. Trailing data is an error.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting decodeJSON accepts.
const maxJSONDepth = 512

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nests deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsonObject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// appendJSONString appends s as a JSON string in this package's canonical
// form: only '"', '\\' and control characters are escaped (the usual short
// escapes where there is one, \u00XX otherwise); everything else is written
// as is. Invalid UTF-8 is replaced by U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendJSONStringBody(dst, s)
	return append(dst, '"')
}

func appendJSONStringBody(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				dst = append(dst, '\\', '"')
			case c == '\\':
				dst = append(dst, '\\', '\\')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// AppendJSON appends v compactly. Object keys keep document order unless
// sorted is set. v may also hold map[string]any (keys then always sorted)
// and float64 (as encoding/json writes it).
func AppendJSON(dst []byte, v any, sorted bool) []byte {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if t {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case json.Number:
		return append(dst, t...)
	case float64:
		b, _ := json.Marshal(t)
		return append(dst, b...)
	case int:
		return strconv.AppendInt(dst, int64(t), 10)
	case string:
		return appendJSONString(dst, t)
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSON(dst, e, sorted)
		}
		return append(dst, ']')
	case *jsonObject:
		keys := t.keys
		if sorted {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		return appendJSONObject(dst, keys, t.vals, sorted)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return appendJSONObject(dst, keys, t, sorted)
	}
	return append(dst, "null"...)
}

// appendJSONObject appends the object of vals with its keys in the order
// of keys.
func appendJSONObject(dst []byte, keys []string, vals map[string]any, sorted bool) []byte {
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = AppendJSON(dst, vals[k], sorted)
	}
	return append(dst, '}')
}

// valueKey returns a string equal for two JSON values exactly when JSON
// Schema calls them equal: sorted keys, numbers by value (1 == 1.0).
func valueKey(v any) string {
	var b strings.Builder
	writeValueKey(&b, v)
	return b.String()
}

func writeValueKey(b *strings.Builder, v any) {
	switch t := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(t))
		if !ok {
			b.WriteString("n" + string(t))
			return
		}
		b.WriteString("n" + r.RatString())
	case *jsonObject:
		keys := append([]string(nil), t.keys...)
		sort.Strings(keys)
		b.WriteByte('{')
		for _, k := range keys {
			b.Write(appendJSONString(nil, k))
			b.WriteByte(':')
			writeValueKey(b, t.vals[k])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, e := range t {
			writeValueKey(b, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	default:
		b.Write(AppendJSON(nil, v, true))
	}
}

// toPlain converts an ordered value to the map form santhosh-tekuri's
// validator reads.
func toPlain(v any) any {
	switch t := v.(type) {
	case *jsonObject:
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			m[k] = toPlain(t.vals[k])
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = toPlain(e)
		}
		return out
	}
	return v
}

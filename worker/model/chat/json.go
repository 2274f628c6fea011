package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// jsonValue is a parsed JSON value that keeps the order of object keys and
// the text of numbers, so that it can be written back as the reference
// templates' tojson filter writes it.
type jsonValue struct {
	kind byte   // 'o' object, 'a' array, 's' string, 'l' literal (number, true, false, null)
	text string // the string, or the literal's text
	keys []string
	vals []jsonValue
}

// parseJSON parses one JSON value.
func parseJSON(raw []byte) (jsonValue, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := parseJSONValue(d)
	if err != nil {
		return jsonValue{}, err
	}
	if _, err := d.Token(); err != io.EOF {
		return jsonValue{}, errors.New("text after the JSON value")
	}
	return v, nil
}

func parseJSONValue(d *json.Decoder) (jsonValue, error) {
	tok, err := d.Token()
	if err != nil {
		return jsonValue{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := jsonValue{kind: 'o'}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return jsonValue{}, err
				}
				ks, _ := k.(string)
				e, err := parseJSONValue(d)
				if err != nil {
					return jsonValue{}, err
				}
				v.keys = append(v.keys, ks)
				v.vals = append(v.vals, e)
			}
			_, err := d.Token()
			return v, err
		case '[':
			v := jsonValue{kind: 'a'}
			for d.More() {
				e, err := parseJSONValue(d)
				if err != nil {
					return jsonValue{}, err
				}
				v.vals = append(v.vals, e)
			}
			_, err := d.Token()
			return v, err
		}
		return jsonValue{}, fmt.Errorf("unexpected %v", x)
	case string:
		return jsonValue{kind: 's', text: x}, nil
	case json.Number:
		return jsonValue{kind: 'l', text: x.String()}, nil
	case bool:
		return jsonValue{kind: 'l', text: fmt.Sprint(x)}, nil
	case nil:
		return jsonValue{kind: 'l', text: "null"}, nil
	}
	return jsonValue{}, fmt.Errorf("unexpected token %v", tok)
}

// get returns the value of key in an object.
func (v jsonValue) get(key string) (jsonValue, bool) {
	for i, k := range v.keys {
		if k == key {
			return v.vals[i], true
		}
	}
	return jsonValue{}, false
}

// toJSON writes v as the templates' tojson filter does (Python's json.dumps
// with ensure_ascii=False): ", " and ": " between items, or with indent > 0
// one item per line, indented, "," at the ends of lines. Numbers keep their
// text.
func toJSON(b *strings.Builder, v jsonValue, indent int) {
	writeJSON(b, v, indent, 0)
}

func writeJSON(b *strings.Builder, v jsonValue, indent, level int) {
	switch v.kind {
	case 's':
		writeJSONString(b, v.text)
	case 'l':
		b.WriteString(v.text)
	case 'o', 'a':
		opening, closing := "{", "}"
		if v.kind == 'a' {
			opening, closing = "[", "]"
		}
		b.WriteString(opening)
		if len(v.vals) == 0 {
			b.WriteString(closing)
			return
		}
		for i, e := range v.vals {
			if i > 0 {
				b.WriteString(",")
				if indent == 0 {
					b.WriteString(" ")
				}
			}
			if indent > 0 {
				b.WriteString("\n")
				b.WriteString(strings.Repeat(" ", indent*(level+1)))
			}
			if v.kind == 'o' {
				writeJSONString(b, v.keys[i])
				b.WriteString(": ")
			}
			writeJSON(b, e, indent, level+1)
		}
		if indent > 0 {
			b.WriteString("\n")
			b.WriteString(strings.Repeat(" ", indent*level))
		}
		b.WriteString(closing)
	}
}

// writeJSONString writes s quoted as Python's json.dumps does with
// ensure_ascii=False: only the quote, the backslash and control characters
// are escaped.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// jsonString returns s as a JSON string in tojson's style.
func jsonString(s string) string {
	var b strings.Builder
	writeJSONString(&b, s)
	return b.String()
}

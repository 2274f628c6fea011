package contracts

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Inline tool blocks in a system prompt:
//
//	<tool name="json_validator" mode="soft">
//	  <param name="schema">{"type": "object"}</param>
//	</tool>
//
// A parameter's text is taken as is, except that the XML entities &lt; &gt;
// &amp; &quot; &apos; (and numeric ones) are decoded, and a <![CDATA[...]]>
// section is taken verbatim. Parameters that hold JSON (schema, lists,
// numbers) are parsed as JSON; a list may also be written comma-separated.

// paramKinds says which parameters hold JSON and which hold plain text.
var paramKinds = map[ToolName]map[string]byte{
	ToolJSONValidator:  {"schema": 'j'},
	ToolRegexMatcher:   {"pattern": 's'},
	ToolXMLValidator:   {"allowed_tags": 'l'},
	ToolPIIRedactor:    {"patterns": 'l', "entities": 'l'},
	ToolToxicityFilter: {"words": 'l', "mode": 's'},
	ToolRetryOnFail:    {"output_contains": 'l', "max_retries": 'j'},
	ToolSuffix:         {"text": 's'},
}

func systemError(code Code, tool string, format string, args ...any) *Error {
	return &Error{Code: code, Field: "system", Tool: tool, Message: fmt.Sprintf(format, args...)}
}

// ParseSystem extracts the inline tool blocks from a system prompt and
// returns the prompt without them (a block alone on its lines takes its
// line break with it). Errors are *Error: invalid_request for a
// malformed block, unknown_tool for a tool that does not exist.
func ParseSystem(system string) (string, []Tool, error) {
	var out strings.Builder
	var tools []Tool
	rest := system
	for {
		i := indexTag(rest, "<tool")
		if i < 0 {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:i])
		block := rest[i:]
		end := strings.Index(block, "</tool>")
		if end < 0 {
			return "", nil, systemError(CodeInvalidRequest, "", "a <tool> block is not closed with </tool>")
		}
		t, err := parseToolBlock(block[:end])
		if err != nil {
			return "", nil, err
		}
		tools = append(tools, t)
		rest = block[end+len("</tool>"):]
		// A block alone on its line leaves no empty line behind.
		so := out.String()
		if (len(so) == 0 || strings.HasSuffix(so, "\n")) && strings.HasPrefix(rest, "\n") {
			rest = rest[1:]
		}
	}
	return out.String(), tools, nil
}

// indexTag finds "<name" followed by a space or '>'.
func indexTag(s, open string) int {
	off := 0
	for {
		i := strings.Index(s[off:], open)
		if i < 0 {
			return -1
		}
		j := off + i + len(open)
		if j < len(s) && (s[j] == '>' || isJSONSpace(s[j])) {
			return off + i
		}
		off = j
	}
}

// parseAttrs reads name="value" pairs up to '>'; it returns the attributes
// and what follows the '>'.
func parseAttrs(s string) (map[string]string, string, error) {
	attrs := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return nil, "", fmt.Errorf("tag is not closed with '>'")
		}
		if s[0] == '>' {
			return attrs, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, "", fmt.Errorf("malformed attribute")
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t\r\n")
		if s == "" || s[0] != '"' && s[0] != '\'' {
			return nil, "", fmt.Errorf("attribute %s needs a quoted value", name)
		}
		q := s[0]
		e := strings.IndexByte(s[1:], q)
		if e < 0 {
			return nil, "", fmt.Errorf("attribute %s is not closed", name)
		}
		attrs[name] = xmlUnescape(s[1 : 1+e])
		s = s[2+e:]
	}
}

func parseToolBlock(block string) (Tool, error) {
	attrs, body, err := parseAttrs(block[len("<tool"):])
	if err != nil {
		return Tool{}, systemError(CodeInvalidRequest, "", "<tool>: %v", err)
	}
	name := ToolName(attrs["name"])
	t := Tool{Name: name, Mode: ToolMode(attrs["mode"]), Params: map[string]json.RawMessage{}}
	if name == "" {
		return t, systemError(CodeInvalidRequest, "", "<tool> needs a name attribute")
	}
	kinds, ok := paramKinds[name]
	if !ok {
		return t, systemError(CodeUnknownTool, string(name), "tool %q is not an inline tool", name)
	}
	for {
		body = strings.TrimLeft(body, " \t\r\n")
		if body == "" {
			break
		}
		if indexTag(body, "<param") != 0 {
			return t, systemError(CodeInvalidRequest, string(name), "unexpected text inside <tool>: only <param> blocks may appear")
		}
		pattrs, pbody, err := parseAttrs(body[len("<param"):])
		if err != nil {
			return t, systemError(CodeInvalidRequest, string(name), "<param>: %v", err)
		}
		var val string
		if strings.HasPrefix(pbody, "<![CDATA[") {
			e := strings.Index(pbody, "]]>")
			if e < 0 {
				return t, systemError(CodeInvalidRequest, string(name), "CDATA section is not closed")
			}
			val = pbody[len("<![CDATA["):e]
			pbody = pbody[e+3:]
			if !strings.HasPrefix(strings.TrimLeft(pbody, " \t\r\n"), "</param>") {
				return t, systemError(CodeInvalidRequest, string(name), "text after a CDATA section")
			}
			pbody = strings.TrimLeft(pbody, " \t\r\n")
		} else {
			e := strings.Index(pbody, "</param>")
			if e < 0 {
				return t, systemError(CodeInvalidRequest, string(name), "a <param> is not closed with </param>")
			}
			val = xmlUnescape(pbody[:e])
			pbody = pbody[e:]
		}
		body = pbody[len("</param>"):]
		pname := pattrs["name"]
		kind, known := kinds[pname]
		if !known {
			return t, systemError(CodeInvalidRequest, string(name), "tool %s has no param %q", name, pname)
		}
		raw, err := paramJSON(kind, val)
		if err != nil {
			return t, systemError(CodeInvalidRequest, string(name), "param %s: %v", pname, err)
		}
		t.Params[pname] = raw
	}
	return t, nil
}

// paramJSON turns a parameter's text into JSON by its kind: 's' a plain
// string, 'j' JSON, 'l' a list (JSON, or comma-separated).
func paramJSON(kind byte, val string) (json.RawMessage, error) {
	switch kind {
	case 's':
		b, _ := json.Marshal(val)
		return b, nil
	case 'l':
		v := strings.TrimSpace(val)
		if strings.HasPrefix(v, "[") {
			var ss []string
			if err := json.Unmarshal([]byte(v), &ss); err != nil {
				return nil, fmt.Errorf("not a JSON array of strings: %v", err)
			}
			return json.RawMessage(v), nil
		}
		var ss []string
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				ss = append(ss, p)
			}
		}
		b, _ := json.Marshal(ss)
		return b, nil
	}
	v := strings.TrimSpace(val)
	if !json.Valid([]byte(v)) {
		return nil, fmt.Errorf("not valid JSON")
	}
	return json.RawMessage(v), nil
}

// xmlUnescape decodes the predefined and numeric XML entities.
func xmlUnescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		j := strings.IndexByte(s, ';')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		ent := s[1:j]
		switch {
		case ent == "lt":
			b.WriteByte('<')
		case ent == "gt":
			b.WriteByte('>')
		case ent == "amp":
			b.WriteByte('&')
		case ent == "quot":
			b.WriteByte('"')
		case ent == "apos":
			b.WriteByte('\'')
		case strings.HasPrefix(ent, "#x"):
			if n, err := strconv.ParseUint(ent[2:], 16, 32); err == nil {
				b.WriteRune(rune(n))
			} else {
				b.WriteString(s[:j+1])
			}
		case strings.HasPrefix(ent, "#"):
			if n, err := strconv.ParseUint(ent[1:], 10, 32); err == nil {
				b.WriteRune(rune(n))
			} else {
				b.WriteString(s[:j+1])
			}
		default:
			b.WriteString(s[:j+1])
		}
		s = s[j+1:]
	}
}

// isJSONSpace reports whether c is JSON (and XML) white space.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

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
//
// A tool may name the memory pool it runs in with a context_id attribute
// (Tool.ContextID): tools with the same id share one pool and budget,
// tools with different ids are budgeted apart.
//
//	<tool name="regex_matcher" context_id="extract">…</tool>
//
// One block is a directive rather than a tool: low_latency_mode, which
// takes no parameters and may be self-closing, asks for the job's worst
// case to be reserved at admission, the same as memory.low_latency
// (JobRequest.ApplyDefaults sets it).
//
//	<tool name="low_latency_mode"/>

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

// DirectiveLowLatencyMode is the name of the system-prompt directive
// <tool name="low_latency_mode"/>: the job asks for reserved admission
// (memory.low_latency). It is not an inline tool (not a ToolName): it is
// never in tools[] and runs nothing in the decode loop.
const DirectiveLowLatencyMode = "low_latency_mode"

// SystemPrompt is a system prompt with its inline blocks taken out.
type SystemPrompt struct {
	// Text is the prompt without the blocks: what is tokenized.
	Text string
	// Tools are the inline tool blocks, in order.
	Tools []Tool
	// LowLatency is set by a <tool name="low_latency_mode"> block.
	LowLatency bool
}

// ParseSystem extracts the inline tool blocks from a system prompt and
// returns the prompt without them (a block alone on its lines takes its
// line break with it). Directives (low_latency_mode) are taken out too but
// are not returned as tools; see ParseSystemPrompt. Errors are *Error:
// invalid_request for a malformed block, unknown_tool for a tool that
// does not exist.
func ParseSystem(system string) (string, []Tool, error) {
	sp, err := ParseSystemPrompt(system)
	if err != nil {
		return "", nil, err
	}
	return sp.Text, sp.Tools, nil
}

// ParseSystemPrompt is ParseSystem with the directives: it returns the
// prompt text, the tools, and whether a low_latency_mode block asks for
// reserved admission.
func ParseSystemPrompt(system string) (SystemPrompt, error) {
	var sp SystemPrompt
	var out strings.Builder
	rest := system
	for {
		i := indexTag(rest, "<tool")
		if i < 0 {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:i])
		block := rest[i:]
		attrs, body, selfClosing, err := parseAttrs(block[len("<tool"):])
		if err != nil {
			return SystemPrompt{}, systemError(CodeInvalidRequest, "", "<tool>: %v", err)
		}
		rest = body
		if selfClosing {
			body = ""
		} else {
			end := strings.Index(body, "</tool>")
			if end < 0 {
				return SystemPrompt{}, systemError(CodeInvalidRequest, "", "a <tool> block is not closed with </tool>")
			}
			body, rest = body[:end], body[end+len("</tool>"):]
		}
		name := ToolName(attrs["name"])
		if name == DirectiveLowLatencyMode {
			if strings.TrimSpace(body) != "" {
				return SystemPrompt{}, systemError(CodeInvalidRequest, string(name), "low_latency_mode takes no parameters")
			}
			sp.LowLatency = true
		} else {
			t, err := parseToolBlock(attrs, body)
			if err != nil {
				return SystemPrompt{}, err
			}
			sp.Tools = append(sp.Tools, t)
		}
		// A block alone on its line leaves no empty line behind.
		so := out.String()
		if (len(so) == 0 || strings.HasSuffix(so, "\n")) && strings.HasPrefix(rest, "\n") {
			rest = rest[1:]
		}
	}
	sp.Text = out.String()
	return sp, nil
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

// parseAttrs reads name="value" pairs up to '>' or '/>'; it returns the
// attributes, what follows the tag, and whether the tag closed itself.
func parseAttrs(s string) (map[string]string, string, bool, error) {
	attrs := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return nil, "", false, fmt.Errorf("tag is not closed with '>'")
		}
		if s[0] == '>' {
			return attrs, s[1:], false, nil
		}
		if strings.HasPrefix(s, "/>") {
			return attrs, s[2:], true, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, "", false, fmt.Errorf("malformed attribute")
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t\r\n")
		if s == "" || s[0] != '"' && s[0] != '\'' {
			return nil, "", false, fmt.Errorf("attribute %s needs a quoted value", name)
		}
		q := s[0]
		e := strings.IndexByte(s[1:], q)
		if e < 0 {
			return nil, "", false, fmt.Errorf("attribute %s is not closed", name)
		}
		attrs[name] = xmlUnescape(s[1 : 1+e])
		s = s[2+e:]
	}
}

// parseToolBlock reads one tool from its tag's attributes and the body
// between <tool …> and </tool>.
func parseToolBlock(attrs map[string]string, body string) (Tool, error) {
	name := ToolName(attrs["name"])
	t := Tool{Name: name, Mode: ToolMode(attrs["mode"]), ContextID: attrs["context_id"], Params: map[string]json.RawMessage{}}
	if name == "" {
		return t, systemError(CodeInvalidRequest, "", "<tool> needs a name attribute")
	}
	kinds, ok := paramKinds[name]
	if !ok {
		return t, systemError(CodeUnknownTool, string(name), "tool %q is not an inline tool", name)
	}
	if msg := contextIDProblem(t.ContextID); msg != "" {
		return t, systemError(CodeInvalidRequest, string(name), "%s", msg)
	}
	for {
		body = strings.TrimLeft(body, " \t\r\n")
		if body == "" {
			break
		}
		if indexTag(body, "<param") != 0 {
			return t, systemError(CodeInvalidRequest, string(name), "unexpected text inside <tool>: only <param> blocks may appear")
		}
		pattrs, pbody, selfClosing, err := parseAttrs(body[len("<param"):])
		if err != nil {
			return t, systemError(CodeInvalidRequest, string(name), "<param>: %v", err)
		}
		if selfClosing {
			return t, systemError(CodeInvalidRequest, string(name), "<param name=%q/> has no value", pattrs["name"])
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

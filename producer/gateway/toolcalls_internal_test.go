package gateway

import (
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
)

// TestCallStream: however the output is cut into deltas, the streamed
// text, call name and arguments are the answer's (toolCallOf), the
// arguments without the call object's closing brace.
func TestCallStream(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode, text string
		call       bool
		name, args string
		complete   bool
	}{
		{"", "Once upon a time", false, "", "", false},
		{"auto", "Once upon a time", false, "", "", false},
		{"auto", "<tool", false, "", "", false},
		{"auto", "<tool_calx", false, "", "", false},
		{"auto", `<tool_call>{"name":"get_weather","arguments":{"city":"Paris","days":2}}`, true, "get_weather", `{"city":"Paris","days":2}`, true},
		{"auto", `<tool_call> { "name" : "a" , "arguments" : {"x":{"y":1}} } `, true, "a", `{"x":{"y":1}}`, true},
		{"any", `{"arguments":{"zone":"UTC"},"name":"get_time"}`, true, "get_time", `{"zone":"UTC"}`, true},
		{"any", `{"name":"get_time","arguments":{"zone":"U`, true, "get_time", `{"zone":"U`, false},
		{"tool:get_weather", ` {"city":"Rome","days":1}`, true, "get_weather", `{"city":"Rome","days":1}`, true},
		{"tool:get_weather", `{"city":"Ro`, true, "get_weather", `{"city":"Ro`, false},
	} {
		res := &contracts.Result{Text: c.text, Metadata: map[string]string{toolCallKey: c.mode}}
		if c.mode == "" {
			res.Metadata = nil
		}
		got := toolCallOf(res)
		if (got != nil) != c.call || got != nil && (got.name != c.name || got.arguments != c.args || got.complete != c.complete) {
			t.Errorf("%s %q: toolCallOf %+v", c.mode, c.text, got)
		}
		for size := 1; size <= len(c.text); size++ {
			var text, name, args string
			calls := 0
			cs := newCallStream(c.mode, func(s string) error { text += s; return nil },
				func(n string) error { name = n; calls++; return nil }, func(s string) error { args += s; return nil })
			for i := 0; i < len(c.text); i += size {
				if err := cs.feed(c.text[i:min(i+size, len(c.text))]); err != nil {
					t.Fatal(err)
				}
			}
			sc, err := cs.end()
			if err != nil {
				t.Fatal(err)
			}
			if !c.call {
				if sc != nil || text != c.text || calls != 0 {
					t.Errorf("%s %q by %d: text %q, call %+v", c.mode, c.text, size, text, sc)
				}
				continue
			}
			if sc == nil || calls != 1 || name != c.name || text != "" || trimSpace(args) != c.args || sc.complete != c.complete {
				t.Errorf("%s %q by %d: %d calls of %q, arguments %q, text %q, %+v", c.mode, c.text, size, calls, name, args, text, sc)
			}
		}
	}
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[len(s)-1] == ' ') {
		if s[0] == ' ' {
			s = s[1:]
		} else {
			s = s[:len(s)-1]
		}
	}
	return s
}

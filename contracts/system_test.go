package contracts

import (
	"errors"
	"testing"
)

func TestParseSystem(t *testing.T) {
	t.Parallel()
	sys := "You are helpful.\n<tool name=\"json_validator\" mode=\"soft\">\n  <param name=\"schema\">{\"type\": \"object\"}</param>\n</tool>\n" +
		"Be brief. <tool name=\"toxicity_filter\"><param name=\"words\">bad, worse</param></tool> Thanks.\n" +
		"<tool name=\"regex_matcher\"><param name=\"pattern\"><![CDATA[a<b>c]]></param></tool>\n" +
		"<tool name=\"suffix\"><param name=\"text\">&lt;end&gt;</param></tool>"
	rest, tools, err := ParseSystem(sys)
	if err != nil {
		t.Fatal(err)
	}
	if want := "You are helpful.\nBe brief.  Thanks.\n"; rest != want {
		t.Fatalf("rest %q, want %q", rest, want)
	}
	if len(tools) != 4 || tools[0].Mode != ToolModeSoft || string(tools[1].Params["words"]) != `["bad","worse"]` ||
		string(tools[2].Params["pattern"]) != `"a\u003cb\u003ec"` || string(tools[3].Params["text"]) != `"\u003cend\u003e"` {
		t.Fatalf("tools %+v", tools)
	}
	for _, bad := range []string{`<tool name="nope"></tool>`, `<tool name="suffix"><param name="text">x</tool>`, `<tool name="suffix">`, `<tool name="suffix"><param name="size">1</param></tool>`} {
		_, _, err := ParseSystem(bad)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: want a contract error, got %v", bad, err)
		}
	}
	if _, _, err := ParseSystem(`<tool name="nope"></tool>`); !errors.Is(err, CodeUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
	if rest, tools, _ := ParseSystem("no tools, <toolbox> is text"); len(tools) != 0 || rest != "no tools, <toolbox> is text" {
		t.Errorf("text without blocks changed: %q", rest)
	}
}

// TestParseSystemDirectives: low_latency_mode is taken out of the prompt
// (self-closing or not) and is not a tool; context_id is read from any
// tool block and checked.
func TestParseSystemDirectives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		system   string
		wantText string
		wantLow  bool
		wantCtx  []string
		wantErr  error
	}{
		{"self-closing", "Be quick.\n<tool name=\"low_latency_mode\"/>\nAnswer.", "Be quick.\nAnswer.", true, nil, nil},
		{"open and close", "<tool name=\"low_latency_mode\"></tool>Answer.", "Answer.", true, nil, nil},
		{"with space", "<tool name='low_latency_mode' />Answer.", "Answer.", true, nil, nil},
		{"none", "Answer.", "Answer.", false, nil, nil},
		{"context ids", "<tool name=\"regex_matcher\" context_id=\"a\"><param name=\"pattern\">x.*</param></tool>" +
			"<tool name=\"suffix\" context_id=\"b-2.x\"><param name=\"text\">!</param></tool><tool name=\"toxicity_filter\"><param name=\"words\">w</param></tool>",
			"", false, []string{"a", "b-2.x", ""}, nil},
		{"directive and tools", "<tool name=\"low_latency_mode\"/><tool name=\"suffix\"><param name=\"text\">!</param></tool>", "", true, []string{""}, nil},
		{"directive with params", "<tool name=\"low_latency_mode\"><param name=\"on\">true</param></tool>", "", false, nil, CodeInvalidRequest},
		{"bad context id", "<tool name=\"suffix\" context_id=\"a b\"><param name=\"text\">!</param></tool>", "", false, nil, CodeInvalidRequest},
		{"self-closing tool without its param", "<tool name=\"suffix\"/>", "", false, []string{""}, nil},
		{"self-closing param", "<tool name=\"suffix\"><param name=\"text\"/></tool>", "", false, nil, CodeInvalidRequest},
		{"unknown self-closing", "<tool name=\"nope\"/>", "", false, nil, CodeUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, err := ParseSystemPrompt(tt.system)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sp.Text != tt.wantText || sp.LowLatency != tt.wantLow || len(sp.Tools) != len(tt.wantCtx) {
				t.Fatalf("got %+v", sp)
			}
			for i, c := range tt.wantCtx {
				if sp.Tools[i].ContextID != c {
					t.Errorf("tools[%d].context_id = %q, want %q", i, sp.Tools[i].ContextID, c)
				}
			}
			// ParseSystem agrees and never returns the directive as a tool.
			text, tools, err := ParseSystem(tt.system)
			if err != nil || text != sp.Text || len(tools) != len(sp.Tools) {
				t.Errorf("ParseSystem = %q, %v, %v", text, tools, err)
			}
		})
	}
}

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

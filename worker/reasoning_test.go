package worker

import (
	"strings"
	"testing"
)

// TestReasoningSplit: a thinking model's output, cut into pieces at every
// possible place (tags split across pieces included), splits into the same
// reasoning and answer as the whole text, and every byte but the tags and
// the blank lines around them goes to exactly one side.
func TestReasoningSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text, reasoning, answer string
	}{
		{"<think>\n221 = 13 × 17.\n</think>\n\nNo, it is not prime.", "221 = 13 × 17.", "No, it is not prime."},
		{"\n<think>\n\n</think>\n\nHello!", "", "Hello!"},
		{"Plain answer, no block.", "", "Plain answer, no block."},
		{"  <thinking is not a tag", "", "<thinking is not a tag"},
		{"<think>unclosed reasoning that ran out of tokens", "unclosed reasoning that ran out of tokens", ""},
		{"<think>a < b and </thin> is not the end</think>answer <think> later is text", "a < b and </thin> is not the end", "answer <think> later is text"},
		{"<thi", "", "<thi"},
		{"", "", ""},
	} {
		r, a := splitReasoning(tc.text)
		if r != tc.reasoning || a != tc.answer {
			t.Errorf("%q: reasoning %q, answer %q; want %q, %q", tc.text, r, a, tc.reasoning, tc.answer)
		}
		// Every way of cutting the text in three pieces gives the same.
		for i := 0; i <= len(tc.text); i++ {
			for j := i; j <= len(tc.text); j++ {
				var s reasoningSplit
				var rs, as strings.Builder
				for _, p := range []string{tc.text[:i], tc.text[i:j], tc.text[j:]} {
					r, a := s.Push(p)
					rs.WriteString(r)
					as.WriteString(a)
				}
				r, a := s.Flush()
				rs.WriteString(r)
				as.WriteString(a)
				if strings.TrimSpace(rs.String()) != tc.reasoning || as.String() != tc.answer {
					t.Fatalf("%q cut at %d, %d: reasoning %q, answer %q", tc.text, i, j, rs.String(), as.String())
				}
			}
		}
	}
}

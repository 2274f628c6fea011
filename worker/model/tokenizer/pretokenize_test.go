package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// splitAll runs a pre-tokenizer over the whole of s.
func splitAll(p preTokenizer, s string) []string {
	var got []string
	p.split(s, 0, len(s), func(lo, hi int) { got = append(got, s[lo:hi]) })
	return got
}

// The expected pieces below were produced by applying each regex of
// llama.cpp's list with a backtracking regex engine (Python's "regex"
// module, \s restricted to the White_Space property), keeping the text
// between matches as pieces, as llama.cpp does.
var preTokenizerCases = map[string][]struct {
	text string
	want []string
}{
	"gpt-2": {
		{"Hello world", []string{"Hello", " world"}},
		{"I'm sure they've 'RE here, you'll see", []string{"I", "'m", " sure", " they", "'ve", " '", "RE", " here", ",", " you", "'ll", " see"}},
		{"don't DON'T", []string{"don", "'t", " DON", "'", "T"}},
		{"  two spaces", []string{" ", " two", " spaces"}},
		{"a   b", []string{"a", "  ", " b"}},
		{"trailing   ", []string{"trailing", "   "}},
		{"tab\t\tword", []string{"tab", "\t", "\t", "word"}},
		{"line1\n\n  line2\r\n", []string{"line", "1", "\n\n ", " line", "2", "\r\n"}},
		{"1234567 a12b 3.14", []string{"1234567", " a", "12", "b", " 3", ".", "14"}},
		{"emoji 🦙🦙 ok 😶\u200d🌫\ufe0f!", []string{"emoji", " 🦙🦙", " ok", " 😶\u200d🌫\ufe0f!"}},
		{"punct!!! ...?? (x)", []string{"punct", "!!!", " ...??", " (", "x", ")"}},
		{"日本語テキスト", []string{"日本語テキスト"}},
		{"\n =", []string{"\n", " ="}},
		{"' era", []string{"'", " era"}},
		{"x$+<=>^~|`y", []string{"x", "$+<=>^~|`", "y"}},
		{"\u00a0\u3000word", []string{"\u00a0", "\u3000", "word"}},
	},
	"llama3": {
		{"Hello world", []string{"Hello", " world"}},
		{"I'm sure they've 'RE here, YOU'LL see", []string{"I", "'m", " sure", " they", "'ve", " '", "RE", " here", ",", " YOU", "'LL", " see"}},
		{"don't DON'T", []string{"don", "'t", " DON", "'T"}},
		{"  two spaces", []string{" ", " two", " spaces"}},
		{"a   b", []string{"a", "  ", " b"}},
		{"trailing   ", []string{"trailing", "   "}},
		{"tab\t\tword", []string{"tab", "\t", "\tword"}},
		{"line1\n\n  line2\r\n", []string{"line", "1", "\n\n", " ", " line", "2", "\r\n"}},
		{"1234567 a12b 3.14", []string{"123", "456", "7", " a", "12", "b", " ", "3", ".", "14"}},
		{"emoji 🦙🦙 ok 😶\u200d🌫\ufe0f!", []string{"emoji", " 🦙🦙", " ok", " 😶\u200d🌫\ufe0f!"}},
		{"punct!!!\n\n...?? (x)", []string{"punct", "!!!\n\n", "...??", " (", "x", ")"}},
		{"日本語テキスト", []string{"日本語テキスト"}},
		{"\n =", []string{"\n", " ="}},
		{"' era", []string{"'", " era"}},
		{"x$+<=>^~|`y", []string{"x", "$+<=>^~|`", "y"}},
		{" \n\n x", []string{" \n\n", " x"}},
		{"a \tb", []string{"a", " ", "\tb"}},
	},
	"qwen2": {
		{"1234567 a12b", []string{"1", "2", "3", "4", "5", "6", "7", " a", "1", "2", "b"}},
		{"I'M here", []string{"I", "'M", " here"}},
		{"x  \n y", []string{"x", "  \n", " y"}},
	},
	"smollm": {
		{"a 123 b4", []string{"a", " ", "1", "2", "3", " b", "4"}},
		{"x1.5", []string{"x", "1", ".", "5"}},
	},
	"default": {
		{"Hello, world!! 12345 a1234567", []string{"Hello", ",", " world", "!!", " ", "123", "45", " a", "123", "456", "7"}},
		{"x$+<=>^~|`y", []string{"x", "$+<=>^~|", "`", "y"}},
		{"٣٣٣٣ 1234", []string{"٣٣٣٣", " ", "123", "4"}},
	},
	"falcon": {
		{"x$+<=>^~|`y 1234567", []string{"x", "$+<=>^~|`", "y", " ", "123", "456", "7"}},
		{"a, b", []string{"a", ",", " b"}},
	},
}

func TestPreTokenizers(t *testing.T) {
	t.Parallel()
	for name, cases := range preTokenizerCases {
		p, ok := preTokenizers[name]
		if !ok {
			t.Fatalf("no pre-tokenizer %q", name)
		}
		for _, c := range cases {
			got := splitAll(p, c.text)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s %q:\n got %q\nwant %q", name, c.text, got, c.want)
			}
		}
	}
}

// TestPreTokenizerCoverage checks, on awkward input, that every scanner cuts
// the text into non-empty pieces that cover it exactly, in order.
func TestPreTokenizerCoverage(t *testing.T) {
	t.Parallel()
	inputs := []string{
		"", " ", "\n", "'", "''s", "\xff", "a\xc3", "\xe6\x97", "   \xff  ", "1\xff2", "' \r\n\r\n",
		"\u0301\u0301a", "\x00\x7f", strings.Repeat("9", 10), "x'", "'S'RE'LL",
	}
	for name, p := range preTokenizers {
		for _, in := range inputs {
			pos := 0
			p.split(in, 0, len(in), func(lo, hi int) {
				if lo != pos || hi <= lo || hi > len(in) {
					t.Errorf("%s %q: piece [%d,%d) after position %d", name, in, lo, hi, pos)
				}
				pos = hi
			})
			if pos != len(in) {
				t.Errorf("%s %q: pieces end at %d of %d", name, in, pos, len(in))
			}
		}
	}
}

// Invalid UTF-8 bytes are characters of their own, in the "other" class:
// they join punctuation runs and never letters.
func TestPreTokenizerInvalidUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pre, text string
		want      []string
	}{
		{"gpt-2", "ab\xffcd", []string{"ab", "\xff", "cd"}},
		{"gpt-2", " \xff\xfe!", []string{" \xff\xfe!"}},
		{"llama3", "a \xc3", []string{"a", " \xc3"}},
		{"llama3", "\xe6\x97x", []string{"\xe6\x97", "x"}},
		{"llama3", "\xffx", []string{"\xffx"}},
	}
	for _, tt := range tests {
		if got := splitAll(preTokenizers[tt.pre], tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("%s %q: got %q, want %q", tt.pre, tt.text, got, tt.want)
		}
	}
}

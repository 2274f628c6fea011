package tokenizer

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// vocabCase is one test vector of llama.cpp's test-tokenizer-0.
type vocabCase struct {
	text string
	want []int32
}

// readVocabCases reads the .inp/.out pair next to a vocab GGUF of the
// shared folder.
func readVocabCases(t *testing.T, rel string) []vocabCase {
	t.Helper()
	return readVocabCasesAt(t, sharedPath(t, rel+".inp"), sharedPath(t, rel+".out"), rel)
}

// readVocabCasesAt reads test-tokenizer-0's pair of files: the inputs,
// each followed by a separator line, and one line of ids per input.
func readVocabCasesAt(t *testing.T, inpPath, outPath, rel string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(inpPath)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	if texts[len(texts)-1] != "" {
		t.Fatalf("%s.inp does not end with the separator", rel)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d inputs but %d outputs", rel, len(texts), len(lines))
	}
	cases := make([]vocabCase, len(texts))
	for i, text := range texts {
		cases[i].text = text
		cases[i].want = []int32{}
		for _, f := range strings.Fields(lines[i]) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", rel, i+1, err)
			}
			cases[i].want = append(cases[i].want, int32(v))
		}
	}
	return cases
}

func TestLlamaCppVocab(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{vocabSPM, vocabGPT2} {
		t.Run(rel[strings.LastIndexByte(rel, '/')+1:], func(t *testing.T) {
			t.Parallel()
			tok := loadShared(t, rel)
			cases := readVocabCases(t, rel)
			if len(cases) != 46 {
				t.Errorf("got %d cases, want 46", len(cases))
			}
			checkVocabCases(t, tok, cases, true)
		})
	}
}

// checkVocabCases encodes each case's text without special tokens, as
// test-tokenizer-0 does, and compares the ids; roundTrip also wants
// Decode to give the text back. It logs and returns how many match.
func checkVocabCases(t *testing.T, tok *Tokenizer, cases []vocabCase, roundTrip bool) int {
	t.Helper()
	pass := 0
	for i, c := range cases {
		got := tok.Encode(c.text, EncodeOptions{})
		if !slices.Equal(got, c.want) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, c.text, got, c.want)
			continue
		}
		pass++
		if back := tok.Decode(got); roundTrip && back != c.text {
			t.Errorf("case %d: Decode(Encode(%q)) = %q", i, c.text, back)
		}
	}
	t.Logf("%d/%d cases match llama.cpp", pass, len(cases))
	return pass
}

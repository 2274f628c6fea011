package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// llamaCppVocabDir is the folder of llama.cpp's models/ggml-vocab-* files
// (ggml-vocab-bert-bge.gguf and its .inp/.out) named by ZL_LLAMACPP_VOCAB;
// the test skips when it is unset or lacks them.
func llamaCppVocabDir(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("ZL_LLAMACPP_VOCAB")
	if dir == "" {
		t.Skip("ZL_LLAMACPP_VOCAB is not set (a folder holding llama.cpp's models/ggml-vocab-*.gguf with .inp and .out)")
	}
	for _, ext := range []string{"", ".inp", ".out"} {
		if _, err := os.Stat(filepath.Join(dir, name+ext)); err != nil {
			t.Skipf("%s: %v", name+ext, err)
		}
	}
	return filepath.Join(dir, name)
}

// llama.cpp's test-tokenizer-0 vectors for the bge WordPiece vocabulary.
func TestWordPieceLlamaCppVocab(t *testing.T) {
	t.Parallel()
	p := llamaCppVocabDir(t, "ggml-vocab-bert-bge.gguf")
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Model() != ModelWPM {
		t.Fatalf("model %q", tok.Model())
	}
	cases := readVocabCasesAt(t, p+".inp", p+".out", filepath.Base(p))
	// WordPiece lowercases and drops accents: no round trip.
	if pass := checkVocabCases(t, tok, cases, false); pass != len(cases) || len(cases) != 46 {
		t.Errorf("%d of %d cases match, want all 46", pass, len(cases))
	}
	// With special tokens: [CLS] first, [SEP] last.
	got := tok.Encode("Hello world", EncodeOptions{AddSpecial: true})
	if want := []int32{101, 7592, 2088, 102}; !slices.Equal(got, want) {
		t.Errorf("with specials: got %v, want %v", got, want)
	}
}

// wpmVocab is a small WordPiece vocabulary in llama.cpp's convention
// (word starts with U+2581, continuations bare).
func wpmVocab(tb testing.TB, extra map[string]any) *Tokenizer {
	tb.Helper()
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
		"▁hello", "▁world", "▁un", "aff", "able", "▁!", "▁,", "▁.", "▁cafe", "▁中", "▁文", "▁$", "▁€",
		"▁naive", "▁a", "b", "▁ab", "▁[", "▁]", "▁cls", "▁x€y", "▁e"}
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = int32(TypeNormal)
		if i < 5 {
			types[i] = int32(TypeControl)
		}
	}
	md := map[string]any{
		keyModel: ModelWPM, keyTokens: toks, keyTokenType: types,
		keyUnknown: uint32(1), keyCLS: uint32(2), keySEP: uint32(3),
	}
	for k, v := range extra {
		md[k] = v
	}
	return synthetic(tb, md)
}

func TestWordPieceEncode(t *testing.T) {
	t.Parallel()
	tok := wpmVocab(t, nil)
	ids := func(ss ...string) []int32 {
		out := []int32{}
		for _, s := range ss {
			id, ok := tok.Lookup(s)
			if !ok {
				t.Fatalf("no token %q", s)
			}
			out = append(out, id)
		}
		return out
	}
	tests := []struct {
		text string
		opts EncodeOptions
		want []int32
	}{
		{"", EncodeOptions{}, ids()},
		{" \t\n ", EncodeOptions{}, ids()},
		{"Hello, WORLD!", EncodeOptions{}, ids("▁hello", "▁,", "▁world", "▁!")},
		{"unaffable", EncodeOptions{}, ids("▁un", "aff", "able")},
		// Accents go (the first character of the decomposition), case folds.
		{"Café NAÏVE", EncodeOptions{}, ids("▁cafe", "▁naive")},
		// A decomposed accent is a mark: it stays, so the word is unknown.
		{"cafe\u0301", EncodeOptions{}, ids("[UNK]")},
		// CJK ideographs are words; other symbols split only in ASCII.
		{"中文", EncodeOptions{}, ids("▁中", "▁文")},
		{"$x€y", EncodeOptions{}, ids("▁$", "▁x€y")},
		// Greedy longest match; an uncovered position makes the word unknown.
		{"ab abb a", EncodeOptions{}, ids("▁ab", "▁ab", "b", "▁a")},
		{"abc hello", EncodeOptions{}, ids("[UNK]", "▁hello")},
		// Controls and U+FFFD vanish; invalid UTF-8 too.
		{"hel\x00lo\u200b \xffworld\ufffd", EncodeOptions{}, ids("▁hello", "▁world")},
		{"hello", EncodeOptions{AddSpecial: true}, ids("[CLS]", "▁hello", "[SEP]")},
		// Special texts are tokens only with ParseSpecial.
		{"[CLS] hello", EncodeOptions{}, ids("▁[", "▁cls", "▁]", "▁hello")},
		{"[CLS] hello", EncodeOptions{ParseSpecial: true}, ids("[CLS]", "▁hello")},
	}
	for _, tt := range tests {
		if got := tok.Encode(tt.text, tt.opts); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q, %+v) = %v, want %v", tt.text, tt.opts, got, tt.want)
		}
	}
	if got := tok.Decode(ids("[CLS]", "▁hello", "▁world", "aff", "[SEP]")); got != "hello worldaff" {
		t.Errorf("Decode = %q", got)
	}
}

func TestWordPieceSpecialFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		md   map[string]any
		want []int32
	}{
		{nil, []int32{2, 5, 3}},
		{map[string]any{keyAddBOS: false}, []int32{5, 3}},
		{map[string]any{keyAddEOS: false}, []int32{2, 5}},
		{map[string]any{keyAddEOS: false, keyAddSEP: true}, []int32{2, 5, 3}},
		{map[string]any{keyBOS: uint32(4)}, []int32{4, 5, 3}},
	}
	for _, tt := range tests {
		if got := wpmVocab(t, tt.md).Encode("hello", EncodeOptions{AddSpecial: true}); !slices.Equal(got, tt.want) {
			t.Errorf("%v: got %v, want %v", tt.md, got, tt.want)
		}
	}
}

func FuzzWordPiece(f *testing.F) {
	for _, s := range []string{"Hello, world!", "Café 中文 $€", "a\x00b\xff", strings.Repeat("ab", 40)} {
		f.Add(s)
	}
	tok := wpmVocab(f, nil)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, EncodeOptions{AddSpecial: true, ParseSpecial: true})
		if len(ids) < 2 || ids[0] != 2 || ids[len(ids)-1] != 3 {
			t.Fatalf("%q: %v lacks [CLS] … [SEP]", s, ids)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("%q: id %d", s, id)
			}
		}
		if n := utf8.RuneCountInString(s); len(ids) > n+2 {
			t.Fatalf("%q: %d ids for %d characters", s, len(ids), n)
		}
	})
}

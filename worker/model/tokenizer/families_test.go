package tokenizer

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// The real Gemma and Qwen3 vocabularies are not available to the tests, so
// these build vocabularies with the same shape and rules: the mechanisms
// (no space prefix, byte fallback, whole-token special texts, qwen2
// pre-tokenization, merges) are what is checked.

// gemmaVocabSize is the size of the Gemma 3 vocabulary.
const gemmaVocabSize = 262144

// gemmaVocab returns the tokenizer metadata of a Gemma-style SentencePiece
// vocabulary of gemmaVocabSize entries: Gemma's special tokens at its ids
// (pad 0, eos 1, bos 2, unk 3, mask 4), thousands of unused control tokens,
// <start_of_turn>/<end_of_turn>, 256 byte tokens, and pieces with and
// without the U+2581 space mark, scored so that shorter pieces merge first.
// As in Gemma's GGUF, add_space_prefix is false.
func gemmaVocab() map[string]any {
	tokens := []string{"<pad>", "<eos>", "<bos>", "<unk>", "<mask>"}
	types := []int32{int32(TypeControl), int32(TypeControl), int32(TypeControl), int32(TypeUnknown), int32(TypeControl)}
	add := func(s string, typ TokenType) {
		tokens = append(tokens, s)
		types = append(types, int32(typ))
	}
	for i := 0; len(tokens) < 105; i++ {
		add(fmt.Sprintf("<unused%d>", i), TypeControl)
	}
	add("<start_of_turn>", TypeUserDefined)
	add("<end_of_turn>", TypeUserDefined) // an end-of-turn text: made control
	for i := 99; i < 6242; i++ {
		add(fmt.Sprintf("<unused%d>", i), TypeControl)
	}
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), TypeByte)
	}
	add("<image_soft_token>", TypeUserDefined)
	for _, s := range []string{"▁", "▁▁", "▁▁▁", "user", "model", "\n", "\n\n", "é", "ü", ".", ",", "!", "?", "'"} {
		add(s, TypeNormal)
	}
	for c := '0'; c <= '9'; c++ {
		add(string(c), TypeNormal)
	}
	for c := 'A'; c <= 'Z'; c++ {
		add(string(c), TypeNormal)
	}
	// Every lower-case word of one to three letters, bare and after the
	// space mark, then four-letter words until the vocabulary is full.
	letters := "abcdefghijklmnopqrstuvwxyz"
	words := []string{""}
	for n := 1; n <= 4 && len(tokens) < gemmaVocabSize; n++ {
		var next []string
		for _, w := range words {
			for _, c := range letters {
				next = append(next, w+string(c))
			}
		}
		words = next
		for _, w := range words {
			if len(tokens) >= gemmaVocabSize-1 {
				break
			}
			add(w, TypeNormal)
			add(spaceMark+w, TypeNormal)
		}
	}
	for len(tokens) < gemmaVocabSize {
		add(fmt.Sprintf("<unused%d>", len(tokens)), TypeControl)
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	return map[string]any{
		keyModel:          "llama",
		keyTokens:         tokens,
		keyScores:         scores,
		keyTokenType:      types,
		keyBOS:            uint32(2),
		keyEOS:            uint32(1),
		keyUnknown:        uint32(3),
		keyAddBOS:         true,
		keyAddEOS:         false,
		keyAddSpacePrefix: false,
	}
}

// gemmaFromFile writes md as a GGUF file in memory and builds its tokenizer,
// returning how long parsing and building took.
func gemmaFromFile(tb testing.TB, md map[string]any) (*Tokenizer, time.Duration, time.Duration) {
	tb.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", "gemma3")
	for _, k := range []string{keyModel, keyTokens, keyScores, keyTokenType, keyBOS, keyEOS, keyUnknown, keyAddBOS, keyAddEOS, keyAddSpacePrefix} {
		w.Set(k, md[k])
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	parsed := time.Now()
	tok, err := FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tok, parsed.Sub(start), time.Since(parsed)
}

var (
	gemmaOnce sync1[*Tokenizer]
)

// sync1 builds a value once per test binary.
type sync1[T any] struct {
	done bool
	v    T
}

func (s *sync1[T]) get(f func() T) T {
	loadMu.Lock()
	defer loadMu.Unlock()
	if !s.done {
		s.v, s.done = f(), true
	}
	return s.v
}

func gemmaTok(tb testing.TB) *Tokenizer {
	return gemmaOnce.get(func() *Tokenizer { return synthetic(tb, gemmaVocab()) })
}

// TestGemmaVocabLoadsFast loads a 262,144-entry vocabulary through a GGUF
// file and encodes with it, reporting the times; the bounds only catch a
// pathological slowdown (the machine running the tests may be busy).
func TestGemmaVocabLoadsFast(t *testing.T) {
	md := gemmaVocab()
	tok, parse, build := gemmaFromFile(t, md)
	if tok.VocabSize() != gemmaVocabSize {
		t.Fatalf("VocabSize() = %d, want %d", tok.VocabSize(), gemmaVocabSize)
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. Ünïcödé 日本 \xff!\n", 1000)
	start := time.Now()
	ids := tok.Encode(text, EncodeOptions{AddSpecial: true})
	enc := time.Since(start)
	t.Logf("262,144-entry vocabulary: GGUF parse %v, FromGGUF %v; Encode of %d bytes %v (%d tokens, %.1f MB/s)",
		parse, build, len(text), enc, len(ids), float64(len(text))/enc.Seconds()/1e6)
	if got := tok.Decode(ids); got != text {
		t.Errorf("round trip of the long text differs (%d bytes back, want %d)", len(got), len(text))
	}
	if build > 5*time.Second || enc > 5*time.Second {
		t.Errorf("too slow: FromGGUF %v, Encode %v", build, enc)
	}
}

func TestGemmaRules(t *testing.T) {
	t.Parallel()
	tok := gemmaTok(t)
	id := func(s string) int32 { return mustLookup(t, tok, s) }

	if tok.Model() != ModelSPM || tok.BOS() != 2 || tok.EOS() != 1 || !tok.AddsBOS() {
		t.Fatalf("model %q BOS %d EOS %d AddsBOS %v, want llama 2 1 true", tok.Model(), tok.BOS(), tok.EOS(), tok.AddsBOS())
	}
	for _, s := range []string{"<eos>", "<end_of_turn>"} {
		if !tok.IsEOG(id(s)) {
			t.Errorf("IsEOG(%s) = false", s)
		}
	}
	if tok.IsEOG(id("<start_of_turn>")) || tok.IsEOG(id("<bos>")) {
		t.Error("<start_of_turn> or <bos> ends generation")
	}

	tests := []struct {
		name string
		text string
		o    EncodeOptions
		want []string
	}{
		// No space prefix: a leading word has no U+2581.
		{name: "no space prefix", text: "the cat", want: []string{"the", "▁cat"}},
		{name: "leading space kept", text: " the", want: []string{"▁the"}},
		{name: "runs of spaces", text: "a   b", want: []string{"a", "▁▁▁", "b"}},
		{name: "bos only with AddSpecial", text: "hi", o: EncodeOptions{AddSpecial: true}, want: []string{"<bos>", "hi"}},
		// Bytes that no piece covers fall back to <0xXX>.
		{name: "byte fallback", text: "é日\xff", want: []string{"é", "<0xE6>", "<0x97>", "<0xA5>", "<0xFF>"}},
		{name: "newlines are pieces", text: "ok\n\nno", want: []string{"ok", "\n\n", "no"}},
		// The Gemma turn format with special parsing: each marker is one
		// token, and no space is put after it.
		{name: "turn markers", text: "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
			o:    EncodeOptions{ParseSpecial: true},
			want: []string{"<bos>", "<start_of_turn>", "user", "\n", "hi", "<end_of_turn>", "\n", "<start_of_turn>", "model", "\n"}},
		// Without special parsing control texts are plain text, but the
		// user-defined <start_of_turn> is still matched whole.
		{name: "control text is plain", text: "<eos>x", want: []string{"<0x3C>", "eos", "<0x3E>", "x"}},
		{name: "user-defined matched whole", text: "a<start_of_turn>b<image_soft_token>", want: []string{"a", "<start_of_turn>", "b", "<image_soft_token>"}},
		{name: "unused control with ParseSpecial", text: "<unused17><mask>", o: EncodeOptions{ParseSpecial: true}, want: []string{"<unused17>", "<mask>"}},
	}
	for _, tt := range tests {
		got := tok.Encode(tt.text, tt.o)
		var gotS []string
		for _, g := range got {
			gotS = append(gotS, tok.Token(g))
		}
		if !slices.Equal(gotS, tt.want) {
			t.Errorf("%s: Encode(%q) = %q, want %q", tt.name, tt.text, gotS, tt.want)
		}
	}
	// Without special parsing no control token comes out of text.
	for _, g := range tok.Encode("<start_of_turn>user\n<end_of_turn><bos><pad>", EncodeOptions{}) {
		if tok.TokenType(g) == TypeControl {
			t.Errorf("control token %q from plain text", tok.Token(g))
		}
	}
}

func TestGemmaRoundTrip(t *testing.T) {
	t.Parallel()
	tok := gemmaTok(t)
	texts := append(slices.Clone(roundTripTexts), "<start_of_turn>user\nhello<end_of_turn>\n", " lead", "trail ")
	for _, s := range texts {
		for _, o := range []EncodeOptions{{}, {AddSpecial: true}} {
			ids := tok.Encode(s, o)
			// No space prefix: Decode gives the text back exactly (a U+2581 in
			// the input reads back as a space).
			if got, want := tok.Decode(ids), spmRoundTrip(s); got != want {
				t.Errorf("%+v: Decode(Encode(%q)) = %q, want %q", o, s, got, want)
			}
		}
	}
}

// qwen3Vocab is a Qwen3-style byte-level BPE vocabulary: the 256 byte
// characters, merges for a few words, a two-byte-then-three-byte CJK merge
// chain and a digit pair, and Qwen3's special tokens, the ChatML markers as
// control tokens and the thinking and tool markers as user-defined ones (as
// Qwen3's GGUF has them: added tokens that are not "special").
func qwen3Vocab() map[string]any {
	var tokens []string
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(byteToRune[b]))
	}
	merges := []string{
		"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
		"Ġ t", "Ġt he", "Ċ Ċ",
		"ä ½", "ä½ ł", "å ¥", "å¥ ½", // 你 好
		"u s", "us e", "use r", "a s", "as s", "ass i", "assi s", "assis t", "assist a", "assista n", "assistan t",
		"1 2", // never used: qwen2 cuts digits one by one
	}
	for _, m := range merges {
		tokens = append(tokens, strings.ReplaceAll(m, " ", ""))
	}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = int32(TypeNormal)
	}
	special := []struct {
		text string
		typ  TokenType
	}{
		{"<|endoftext|>", TypeControl},
		{"<|im_start|>", TypeControl},
		{"<|im_end|>", TypeControl},
		{"<tool_call>", TypeUserDefined},
		{"</tool_call>", TypeUserDefined},
		{"<tool_response>", TypeUserDefined},
		{"</tool_response>", TypeUserDefined},
		{"<think>", TypeUserDefined},
		{"</think>", TypeUserDefined},
	}
	for _, s := range special {
		tokens = append(tokens, s.text)
		types = append(types, int32(s.typ))
	}
	return map[string]any{
		keyModel:     "gpt2",
		keyPre:       "qwen2",
		keyTokens:    tokens,
		keyTokenType: types,
		keyMerges:    merges,
		keyEOS:       uint32(slices.Index(tokens, "<|im_end|>")),
		keyAddBOS:    false,
	}
}

func TestQwen3Rules(t *testing.T) {
	t.Parallel()
	tok := synthetic(t, qwen3Vocab())
	if tok.Pre() != "qwen2" || tok.BOS() != -1 || tok.AddsBOS() {
		t.Fatalf("Pre %q BOS %d AddsBOS %v, want qwen2 -1 false", tok.Pre(), tok.BOS(), tok.AddsBOS())
	}
	for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
		if !tok.IsEOG(mustLookup(t, tok, s)) {
			t.Errorf("IsEOG(%s) = false", s)
		}
	}
	if tok.IsEOG(mustLookup(t, tok, "</think>")) {
		t.Error("</think> ends generation")
	}
	tests := []struct {
		name string
		text string
		o    EncodeOptions
		want []string
	}{
		{name: "merges", text: "hello world", want: []string{"hello", "Ġworld"}},
		{name: "multi-byte merges", text: "你好", want: []string{"ä½ł", "å¥½"}},
		// qwen2 cuts every digit on its own, so the "1 2" merge never applies.
		{name: "digits one by one", text: "123", want: []string{"1", "2", "3"}},
		{name: "chatml prompt", text: "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
			o: EncodeOptions{ParseSpecial: true},
			want: []string{"<|im_start|>", "user", "Ċ", "hello", "<|im_end|>", "Ċ", "<|im_start|>", "assistant", "Ċ",
				"<think>", "ĊĊ", "</think>", "ĊĊ"}},
		{name: "tool call", text: "<tool_call>\n{}\n</tool_call>", o: EncodeOptions{ParseSpecial: true},
			want: []string{"<tool_call>", "Ċ", "{", "}", "Ċ", "</tool_call>"}},
		// Without special parsing ChatML markers are plain text, while the
		// user-defined thinking markers are still matched whole.
		{name: "control as text", text: "<|im_end|>", want: []string{"<", "|", "i", "m", "_", "e", "n", "d", "|", ">"}},
		{name: "think without ParseSpecial", text: "<think> the</think>", want: []string{"<think>", "Ġthe", "</think>"}},
	}
	for _, tt := range tests {
		got := tok.Encode(tt.text, tt.o)
		var gotS []string
		for _, g := range got {
			gotS = append(gotS, tok.Token(g))
		}
		if !slices.Equal(gotS, tt.want) {
			t.Errorf("%s: Encode(%q) = %q, want %q", tt.name, tt.text, gotS, tt.want)
		}
	}
}

func TestQwen3RoundTrip(t *testing.T) {
	t.Parallel()
	tok := synthetic(t, qwen3Vocab())
	texts := append(slices.Clone(roundTripTexts),
		"<think>\nreasoning\n</think>\n\nanswer", "你好 hello\xe4\xbd", "\xe4\xbd\xa0\xe5", "1234567890")
	for _, s := range texts {
		ids := tok.Encode(s, EncodeOptions{AddSpecial: true})
		if got := tok.Decode(ids); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
		// Streaming gives the same bytes, never a cut character before the end.
		dec := tok.NewDecoder()
		var b strings.Builder
		for _, id := range ids {
			part := dec.Add(id)
			if !utf8.ValidString(part) && utf8.ValidString(s) {
				t.Errorf("stream of %q gave invalid UTF-8 %q", s, part)
			}
			b.WriteString(part)
		}
		b.WriteString(dec.Flush())
		if b.String() != s {
			t.Errorf("stream decode of %q = %q", s, b.String())
		}
	}
}

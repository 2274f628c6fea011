package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// chatVocab is a small byte-level BPE vocabulary: the 256 byte characters,
// a few merges, and ChatML-style special tokens. Keys in extra are added or
// replace the defaults; a nil value deletes a key.
func chatVocab(extra map[string]any) map[string]any {
	var tokens []string
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(byteToRune[b]))
	}
	merges := []string{"h e", "he l", "hel l", "hell o", "Ġ w", "Ġw o", "Ġwo r", "Ġwor l", "Ġworl d"}
	for _, m := range merges {
		tokens = append(tokens, strings.ReplaceAll(m, " ", ""))
	}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = int32(TypeNormal)
	}
	for _, s := range []struct {
		text string
		typ  TokenType
	}{
		{"<|im_start|>", TypeControl},
		{"<|im_end|>", TypeNormal}, // an end-of-turn text: made control
		{"<|im", TypeControl},
		{"<tool>", TypeUserDefined},
		{"<|endoftext|>", TypeControl},
		{"hello", TypeNormal},  // reachable by the merges
		{"Ġhello", TypeNormal}, // not reachable: only with ignore_merges
	} {
		tokens = append(tokens, s.text)
		types = append(types, int32(s.typ))
	}
	md := map[string]any{
		keyModel:     "gpt2",
		keyPre:       "qwen2",
		keyTokens:    tokens,
		keyTokenType: types,
		keyMerges:    merges,
		keyEOS:       uint32(slices.Index(tokens, "<|endoftext|>")),
	}
	for k, v := range extra {
		if v == nil {
			delete(md, k)
		} else {
			md[k] = v
		}
	}
	return md
}

func mustLookup(t *testing.T, tok *Tokenizer, s string) int32 {
	t.Helper()
	id, ok := tok.Lookup(s)
	if !ok {
		t.Fatalf("no token %q", s)
	}
	return id
}

func TestSpecialTokens(t *testing.T) {
	t.Parallel()
	tok := synthetic(t, chatVocab(nil))
	id := func(s string) int32 { return mustLookup(t, tok, s) }
	start, end, im, tool := id("<|im_start|>"), id("<|im_end|>"), id("<|im"), id("<tool>")
	hello, world := id("hello"), id("Ġworld")
	under := id("_")

	tests := []struct {
		name  string
		text  string
		parse bool
		want  []int32
	}{
		{"chat turn", "<|im_start|>hello world<|im_end|>", true, []int32{start, hello, world, end}},
		{"longest match wins", "<|im_", true, []int32{im, under}},
		{"adjacent specials", "<|im_start|><|im_end|>", true, []int32{start, end}},
		{"user-defined always", "<tool>hello", false, []int32{tool, hello}},
		{"user-defined parsed", "<tool>hello", true, []int32{tool, hello}},
	}
	for _, tt := range tests {
		got := tok.Encode(tt.text, EncodeOptions{ParseSpecial: tt.parse})
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Encode(%q, parse=%v) = %v, want %v", tt.name, tt.text, tt.parse, got, tt.want)
		}
	}

	// Without ParseSpecial control texts are plain text.
	text := "<|im_start|>hello<|im_end|><|endoftext|>"
	ids := tok.Encode(text, EncodeOptions{})
	for _, id := range ids {
		if tok.TokenType(id) == TypeControl {
			t.Errorf("Encode(%q) without ParseSpecial = %v: contains control token %d", text, ids, id)
		}
	}
	if got := tok.Decode(ids); got != text {
		t.Errorf("Decode = %q, want %q", got, text)
	}

	// Decoding drops control tokens; Piece shows them.
	if got := tok.Decode([]int32{start, hello, world, end, tool}); got != "hello world<tool>" {
		t.Errorf("Decode = %q, want %q", got, "hello world<tool>")
	}
	if got := string(tok.Piece(start)); got != "<|im_start|>" {
		t.Errorf("Piece(im_start) = %q", got)
	}
	if got := string(tok.Piece(world)); got != " world" {
		t.Errorf("Piece(Ġworld) = %q, want %q", got, " world")
	}
	if tok.Piece(-1) != nil || tok.Piece(int32(tok.VocabSize())) != nil || tok.Token(-1) != "" {
		t.Error("out-of-range ids must give empty pieces and tokens")
	}

	// End of generation.
	if tok.TokenType(end) != TypeControl {
		t.Errorf("TokenType(<|im_end|>) = %d, want control", tok.TokenType(end))
	}
	for _, tt := range []struct {
		id   int32
		want bool
	}{{end, true}, {tok.EOS(), true}, {start, false}, {hello, false}, {-1, false}} {
		if got := tok.IsEOG(tt.id); got != tt.want {
			t.Errorf("IsEOG(%d) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestSpecialTokensSPM(t *testing.T) {
	t.Parallel()
	tok := loadShared(t, vocabSPM)
	// After a special token SentencePiece puts a space prefix again, as
	// llama.cpp does.
	got := tok.Encode("<s>Hi</s>", EncodeOptions{ParseSpecial: true})
	want := slices.Concat([]int32{1}, tok.Encode("Hi", EncodeOptions{}), []int32{2})
	if !slices.Equal(got, want) {
		t.Errorf("Encode(<s>Hi</s>) = %v, want %v", got, want)
	}
	if d := tok.Decode(got); d != "Hi" {
		t.Errorf("Decode = %q, want %q", d, "Hi")
	}
	plain := tok.Encode("<s>Hi</s>", EncodeOptions{})
	if slices.Contains(plain, 1) || slices.Contains(plain, 2) {
		t.Errorf("without ParseSpecial: %v contains BOS or EOS", plain)
	}
}

func TestIgnoreMerges(t *testing.T) {
	t.Parallel()
	// "Ġhello" is a token the merges cannot build. Llama 3 pre-tokenizers
	// take a word that is a whole token as it is; the others merge.
	for _, tt := range []struct {
		pre  string
		want []string
	}{
		{"llama-bpe", []string{"Ġhello"}},
		{"qwen2", []string{"Ġ", "hello"}},
	} {
		tok := synthetic(t, chatVocab(map[string]any{keyPre: tt.pre}))
		var got []string
		for _, id := range tok.Encode(" hello", EncodeOptions{}) {
			got = append(got, tok.Token(id))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Encode(\" hello\") = %q, want %q", tt.pre, got, tt.want)
		}
	}
}

func TestAddSpecial(t *testing.T) {
	t.Parallel()
	eos := uint32(256 + 9 + 4) // <|endoftext|> in chatVocab
	tests := []struct {
		name     string
		md       map[string]any
		wantBOS  bool
		wantEOS  bool
		wantBOSI int32
	}{
		{"qwen2 default: nothing", chatVocab(nil), false, false, -1},
		{"llama-bpe default: BOS", chatVocab(map[string]any{keyPre: "llama-bpe", keyBOS: uint32(5)}), true, false, 5},
		{"llama-bpe without a BOS id", chatVocab(map[string]any{keyPre: "llama-bpe"}), false, false, -1},
		{"flags from metadata", chatVocab(map[string]any{keyBOS: uint32(7), keyAddBOS: true, keyAddEOS: true}), true, true, 7},
		{"BOS id out of range ignored", chatVocab(map[string]any{keyBOS: uint32(0xFFFFFFFF), keyAddBOS: true}), false, false, -1},
	}
	for _, tt := range tests {
		tok := synthetic(t, tt.md)
		if tok.BOS() != tt.wantBOSI {
			t.Errorf("%s: BOS() = %d, want %d", tt.name, tok.BOS(), tt.wantBOSI)
		}
		ids := tok.Encode("hello", EncodeOptions{AddSpecial: true})
		if got := len(ids) > 0 && ids[0] == tok.BOS(); got != tt.wantBOS {
			t.Errorf("%s: %v starts with BOS = %v, want %v", tt.name, ids, got, tt.wantBOS)
		}
		if got := len(ids) > 0 && ids[len(ids)-1] == int32(eos); got != tt.wantEOS {
			t.Errorf("%s: %v ends with EOS = %v, want %v", tt.name, ids, got, tt.wantEOS)
		}
		if plain := tok.Encode("hello", EncodeOptions{}); len(plain) != 1 {
			t.Errorf("%s: without AddSpecial got %v, want just \"hello\"", tt.name, plain)
		}
	}

	// SentencePiece defaults: BOS 1, EOS 2, add BOS, no EOS.
	spm := loadShared(t, stories)
	if spm.BOS() != 1 || spm.EOS() != 2 || !spm.AddsBOS() {
		t.Errorf("stories260K: BOS %d EOS %d AddsBOS %v, want 1 2 true", spm.BOS(), spm.EOS(), spm.AddsBOS())
	}
	if got := spm.Encode("", EncodeOptions{AddSpecial: true}); !slices.Equal(got, []int32{1}) {
		t.Errorf("stories260K: Encode(\"\") = %v, want [1]", got)
	}
}

func TestFromGGUFErrors(t *testing.T) {
	t.Parallel()
	spm := func(extra map[string]any) map[string]any {
		md := map[string]any{
			keyModel:  "llama",
			keyTokens: []string{"<unk>", "<s>", "</s>", "▁a"},
			keyScores: []float32{0, 0, 0, -1},
		}
		for k, v := range extra {
			if v == nil {
				delete(md, k)
			} else {
				md[k] = v
			}
		}
		return md
	}
	tests := []struct {
		name    string
		md      map[string]any
		wantErr error
		wantMsg string
	}{
		{"valid llama", spm(nil), nil, ""},
		{"valid gpt2", chatVocab(nil), nil, ""},
		{"no model", spm(map[string]any{keyModel: nil}), ErrMissingKey, keyModel},
		{"unknown model", spm(map[string]any{keyModel: "t5"}), ErrUnsupportedModel, `"t5"`},
		{"no tokens", spm(map[string]any{keyTokens: nil}), ErrMissingKey, keyTokens},
		{"tokens not strings", spm(map[string]any{keyTokens: []int32{1}}), ErrMissingKey, keyTokens},
		{"empty vocabulary", spm(map[string]any{keyTokens: []string{}, keyScores: nil}), ErrInvalidVocab, "0 entries"},
		{"short scores", spm(map[string]any{keyScores: []float32{0}}), ErrInvalidVocab, keyScores},
		{"scores of the wrong type", spm(map[string]any{keyScores: []string{"a", "b", "c", "d"}}), ErrInvalidVocab, keyScores},
		{"long token types", spm(map[string]any{keyTokenType: []int32{1, 1, 1, 1, 1}}), ErrInvalidVocab, keyTokenType},
		{"gpt2 without merges", chatVocab(map[string]any{keyMerges: nil}), ErrMissingKey, keyMerges},
		{"unknown pre-tokenizer", chatVocab(map[string]any{keyPre: "gpt-4o"}), ErrUnsupportedPre, `"gpt-4o"`},
	}
	for _, tt := range tests {
		_, err := FromGGUF(&gguf.File{Metadata: tt.md})
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%s: error %q does not mention %s", tt.name, err, tt.wantMsg)
		}
	}
}

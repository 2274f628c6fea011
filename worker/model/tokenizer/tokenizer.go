package tokenizer

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// TokenType is the kind of a vocabulary entry, as tokenizer.ggml.token_type
// stores it.
type TokenType int32

// Token types. Encode and Decode treat them as llama.cpp does: see Decode and
// EncodeOptions.
const (
	// TypeUndefined marks an entry of no known type (also any value outside
	// this list). It decodes to nothing.
	TypeUndefined TokenType = 0
	// TypeNormal is an ordinary piece of text.
	TypeNormal TokenType = 1
	// TypeUnknown is the unknown token ("<unk>").
	TypeUnknown TokenType = 2
	// TypeControl is a control token such as BOS, EOS or "<|im_start|>".
	TypeControl TokenType = 3
	// TypeUserDefined is a token added to the vocabulary as a whole string,
	// always matched before the merges run.
	TypeUserDefined TokenType = 4
	// TypeUnused is a reserved, unused entry. It decodes to nothing.
	TypeUnused TokenType = 5
	// TypeByte is a SentencePiece byte-fallback token "<0xXX>".
	TypeByte TokenType = 6
)

// Model names as tokenizer.ggml.model spells them.
const (
	// ModelSPM is SentencePiece-style BPE with scores and byte fallback
	// (Llama 1 and 2, Mistral, TinyLlama).
	ModelSPM = "llama"
	// ModelGPT2 is GPT-2 byte-level BPE with ranked merges (GPT-2, Llama 3,
	// Qwen 2, SmolLM).
	ModelGPT2 = "gpt2"
	// ModelWPM is WordPiece, llama.cpp's WPM (BERT encoders: bge,
	// all-MiniLM, e5).
	ModelWPM = "bert"
)

// Metadata keys read by FromGGUF.
const (
	keyModel          = "tokenizer.ggml.model"
	keyPre            = "tokenizer.ggml.pre"
	keyTokens         = "tokenizer.ggml.tokens"
	keyScores         = "tokenizer.ggml.scores"
	keyTokenType      = "tokenizer.ggml.token_type"
	keyMerges         = "tokenizer.ggml.merges"
	keyBOS            = "tokenizer.ggml.bos_token_id"
	keyEOS            = "tokenizer.ggml.eos_token_id"
	keyEOT            = "tokenizer.ggml.eot_token_id"
	keyEOM            = "tokenizer.ggml.eom_token_id"
	keyUnknown        = "tokenizer.ggml.unknown_token_id"
	keyCLS            = "tokenizer.ggml.cls_token_id"
	keySEP            = "tokenizer.ggml.seperator_token_id" // llama.cpp's spelling
	keyAddSEP         = "tokenizer.ggml.add_sep_token"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// eogTexts are the token texts that end generation whatever the metadata
// says, as llama.cpp recognises them. Such tokens are also treated as
// control tokens.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
	"<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
	"<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>",
}

// Tokenizer converts between text and token ids for one vocabulary. It is
// built once by FromGGUF and is then read-only: every method is safe for
// concurrent use, except that a StreamDecoder belongs to one goroutine.
type Tokenizer struct {
	model string
	pre   string // the tokenizer.ggml.pre value in effect ("" for "llama")

	tokens []string
	scores []float32 // nil when the file has none (all scores 0)
	types  []TokenType
	toID   map[string]int32

	bos, eos, eot, eom, unk int32
	addBOS, addEOS          bool
	sep                     int32 // WordPiece: [SEP], put last by AddSpecial
	addSEP                  bool
	addSpacePrefix          bool
	eog                     map[int32]struct{}

	// pieceData[pieceOff[id]:pieceOff[id+1]] are the bytes token id stands
	// for, special tokens rendered as their text.
	pieceData []byte
	pieceOff  []uint32
	maxPiece  int // the longest piece, in bytes (at least 1)

	special specialMatcher

	// SentencePiece: the token for each byte that is not in the vocabulary,
	// and whether text can be merged word by word (see spmEncode).
	byteFallback [256]int32
	spmWords     bool

	// WordPiece: the longest token text, in bytes.
	wpmMaxLen int

	// Byte-level BPE.
	preTok  preTokenizer
	merges  map[uint64]bpeMerge
	byteSym [256]int32 // symbol id of each byte's GPT-2 character, or -1
	byteTok [256]int32 // token id of each byte's GPT-2 character, or -1

	scratch sync.Pool // *scratch
}

// FromGGUF builds the tokenizer described by the tokenizer.ggml.* metadata
// of f. It copies what it needs: the tokenizer stays valid after f.Close.
//
// Supported models are "llama" (SentencePiece), "gpt2" (byte-level BPE,
// with the pre-tokenizers listed in the package documentation) and "bert"
// (WordPiece). Errors wrap
// ErrMissingKey, ErrUnsupportedModel, ErrUnsupportedPre or ErrInvalidVocab.
//
// Defaults follow llama.cpp: for "llama", BOS 1, EOS 2, unknown 0, add BOS
// and add a space prefix unless the metadata says otherwise; for "gpt2",
// no BOS/EOS/unknown token unless named by the metadata, and add BOS only
// for the Llama 3 family of pre-tokenizers; for "bert", [CLS] (BOS, else
// cls_token_id, else 101) first and [SEP] (seperator_token_id, else 102)
// last, unknown 100, each unless add_bos_token or add_sep_token (else
// add_eos_token) says false. A special-token id that is out of
// range is ignored in favour of the default.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, ok := f.String(keyModel)
	if !ok {
		return nil, fmt.Errorf("%w: %s (is this a model file with a vocabulary?)", ErrMissingKey, keyModel)
	}
	if model != ModelSPM && model != ModelGPT2 && model != ModelWPM {
		return nil, fmt.Errorf("%w %q (supported: %q, %q, %q)", ErrUnsupportedModel, model, ModelSPM, ModelGPT2, ModelWPM)
	}
	tokens, ok := f.Strings(keyTokens)
	if !ok {
		return nil, fmt.Errorf("%w: %s (a string array)", ErrMissingKey, keyTokens)
	}
	n := len(tokens)
	if n == 0 || n > math.MaxInt32-1 {
		return nil, fmt.Errorf("%w: %s has %d entries", ErrInvalidVocab, keyTokens, n)
	}
	tokens = slices.Clone(tokens)
	t := &Tokenizer{model: model, tokens: tokens, toID: make(map[string]int32, n)}

	if _, present := f.Metadata[keyScores]; present {
		scores, ok := f.Float32s(keyScores)
		if !ok || len(scores) != n {
			return nil, fmt.Errorf("%w: %s must be %d float32 values, one per token", ErrInvalidVocab, keyScores, n)
		}
		t.scores = slices.Clone(scores)
	}
	t.types = make([]TokenType, n)
	if _, present := f.Metadata[keyTokenType]; present {
		types, ok := f.Int32s(keyTokenType)
		if !ok || len(types) != n {
			return nil, fmt.Errorf("%w: %s must be %d integers, one per token", ErrInvalidVocab, keyTokenType, n)
		}
		for i, v := range types {
			if v >= int32(TypeNormal) && v <= int32(TypeByte) {
				t.types[i] = TokenType(v)
			}
		}
	} else {
		for i, s := range tokens {
			t.types[i] = TypeNormal
			if model == ModelSPM && isByteToken(s) {
				t.types[i] = TypeByte
			}
		}
	}
	for i, s := range tokens {
		if s == "" {
			continue
		}
		if _, dup := t.toID[s]; !dup {
			t.toID[s] = int32(i)
		}
	}

	// Special ids and flags.
	id := func(key string, def int32) int32 {
		if v, ok := f.Uint(key); ok && v < uint64(n) {
			return int32(v)
		}
		if def >= int32(n) {
			return -1
		}
		return def
	}
	flag := func(key string, def bool) bool {
		if v, ok := f.Bool(key); ok {
			return v
		}
		return def
	}
	switch model {
	case ModelSPM:
		t.bos, t.eos, t.unk = id(keyBOS, 1), id(keyEOS, 2), id(keyUnknown, 0)
		t.addBOS = flag(keyAddBOS, true)
		t.addSpacePrefix = flag(keyAddSpacePrefix, true)
	case ModelGPT2:
		pre, _ := f.String(keyPre)
		if pre == "" {
			pre = "default"
		}
		p, ok := preTokenizers[pre]
		if !ok {
			return nil, fmt.Errorf("%w %q in %s (supported: %s)", ErrUnsupportedPre, pre, keyPre, strings.Join(PreTokenizers(), ", "))
		}
		t.pre, t.preTok = pre, p
		t.bos, t.eos, t.unk = id(keyBOS, -1), id(keyEOS, -1), id(keyUnknown, -1)
		t.addBOS = flag(keyAddBOS, p.addBOS)
		merges, ok := f.Strings(keyMerges)
		if !ok {
			return nil, fmt.Errorf("%w: %s (a string array, required for %q)", ErrMissingKey, keyMerges, model)
		}
		t.loadBPE(merges)
	case ModelWPM:
		t.bos, t.eos, t.unk = id(keyBOS, id(keyCLS, wpmCLS)), id(keyEOS, -1), id(keyUnknown, wpmUNK)
		t.sep = id(keySEP, wpmSEP)
		t.addBOS = flag(keyAddBOS, true)
		t.addSEP = flag(keyAddSEP, flag(keyAddEOS, true))
		// Every word is written with a U+2581 in front: Decode drops the
		// first one, as for SentencePiece.
		t.addSpacePrefix = true
		t.loadWPM()
	}
	t.eot, t.eom = id(keyEOT, -1), id(keyEOM, -1)
	t.addEOS = flag(keyAddEOS, false) && model != ModelWPM // [SEP] plays EOS there

	t.loadEOG()
	t.loadPieces()
	t.loadSpecial()
	if model == ModelSPM {
		t.loadByteFallback()
		t.spmWords = spmWordsOK(tokens)
	}
	t.scratch.New = func() any { return new(scratch) }
	return t, nil
}

// PreTokenizers lists the tokenizer.ggml.pre values FromGGUF accepts for
// "gpt2" vocabularies, sorted.
func PreTokenizers() []string {
	names := make([]string, 0, len(preTokenizers))
	for k := range preTokenizers {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// isByteToken reports whether s is a SentencePiece byte token "<0xXX>" (hex
// digits in either case).
func isByteToken(s string) bool {
	_, ok := parseByteToken(s)
	return ok
}

func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// loadEOG collects the end-of-generation set: EOS, EOT, EOM and the tokens
// whose text is in eogTexts (which become control tokens, as in llama.cpp).
func (t *Tokenizer) loadEOG() {
	t.eog = map[int32]struct{}{}
	for _, s := range eogTexts {
		if id, ok := t.toID[s]; ok {
			t.eog[id] = struct{}{}
			t.types[id] = TypeControl
		}
	}
	// Harmony (gpt-oss) vocabularies end a turn with <|return|> or <|call|>;
	// there <|end|> separates messages and must not stop generation.
	ret, okR := t.toID["<|return|>"]
	call, okC := t.toID["<|call|>"]
	end, okE := t.toID["<|end|>"]
	if okR && okC && okE && ret != end && call != end {
		delete(t.eog, end)
		t.types[end] = TypeUserDefined
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
}

// loadPieces renders every token to the bytes it stands for.
func (t *Tokenizer) loadPieces() {
	t.pieceOff = make([]uint32, len(t.tokens)+1)
	size := 0
	for _, s := range t.tokens {
		size += len(s)
	}
	t.pieceData = make([]byte, 0, size)
	for i, s := range t.tokens {
		switch typ := t.types[i]; {
		case typ == TypeControl || typ == TypeUnknown || typ == TypeUserDefined:
			t.pieceData = append(t.pieceData, s...)
		case (t.model == ModelSPM || t.model == ModelWPM) && typ == TypeNormal:
			t.pieceData = appendUnescaped(t.pieceData, s)
		case t.model == ModelSPM && typ == TypeByte:
			if b, ok := parseByteToken(s); ok {
				t.pieceData = append(t.pieceData, b)
			} else {
				t.pieceData = append(t.pieceData, s...)
			}
		case t.model == ModelGPT2 && typ == TypeNormal:
			t.pieceData = appendByteDecoded(t.pieceData, s)
		}
		t.pieceOff[i+1] = uint32(len(t.pieceData))
		t.maxPiece = max(t.maxPiece, int(t.pieceOff[i+1]-t.pieceOff[i]))
	}
	t.maxPiece = max(t.maxPiece, 1)
}

// MaxPieceBytes is the most bytes of text one token stands for. Encoding n
// bytes of text therefore gives at least n / MaxPieceBytes tokens, which
// lets a caller refuse a text too long for a context without tokenizing
// it.
func (t *Tokenizer) MaxPieceBytes() int { return t.maxPiece }

// spaceMark is U+2581, which SentencePiece writes for a space.
const spaceMark = "\u2581"

// appendUnescaped appends s with every U+2581 turned into a space.
func appendUnescaped(dst []byte, s string) []byte {
	for {
		i := strings.Index(s, spaceMark)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, ' ')
		s = s[i+len(spaceMark):]
	}
}

// Model returns the tokenizer type: "llama" (SentencePiece), "gpt2"
// (byte-level BPE) or "bert" (WordPiece).
func (t *Tokenizer) Model() string { return t.model }

// Pre returns the tokenizer.ggml.pre value in effect for a "gpt2" tokenizer
// ("default" when the file has none), and "" for "llama".
func (t *Tokenizer) Pre() string { return t.pre }

// VocabSize returns the number of tokens; valid ids are 0..VocabSize()-1.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the beginning-of-sequence token id, or -1 if there is none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token id, or -1 if there is none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// AddsBOS reports whether Encode with AddSpecial puts BOS first (the
// tokenizer.ggml.add_bos_token flag or its default).
func (t *Tokenizer) AddsBOS() bool { return t.addBOS && t.bos >= 0 }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, or one of the
// end-of-turn tokens recognised by their text ("<|im_end|>", "<|eot_id|>",
// "<|end_of_text|>", "<|endoftext|>", "<end_of_turn>", ...).
func (t *Tokenizer) IsEOG(id int32) bool {
	_, ok := t.eog[id]
	return ok
}

// Token returns the vocabulary string of id as stored in the file
// ("▁the", "Ġthe", "<0x0A>", "<s>"), or "" for an id out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Lookup returns the id of the vocabulary string s (as Token spells it). When
// the vocabulary lists a string twice, the lower id wins.
func (t *Tokenizer) Lookup(s string) (int32, bool) {
	id, ok := t.toID[s]
	return id, ok
}

// TokenType returns the type of id, or TypeUndefined for an id out of range.
// Tokens that llama.cpp treats as end of turn by their text are reported as
// TypeControl whatever the file says.
func (t *Tokenizer) TokenType(id int32) TokenType {
	if id < 0 || int(id) >= len(t.types) {
		return TypeUndefined
	}
	return t.types[id]
}

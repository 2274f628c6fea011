package tokenizer

import "unicode/utf8"

// Piece returns the bytes token id stands for: for "llama" the vocabulary
// string with U+2581 turned into spaces, or the single byte of a "<0xXX>"
// token; for "gpt2" the bytes behind the GPT-2 characters. Control, unknown
// and user-defined tokens give their text ("<s>", "<|im_end|>"); unused and
// undefined entries, and ids out of range, give nil. The slice is new on
// every call.
func (t *Tokenizer) Piece(id int32) []byte {
	p := t.piece(id)
	if p == nil {
		return nil
	}
	return append([]byte(nil), p...)
}

// piece returns the stored bytes of id, or nil.
func (t *Tokenizer) piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return nil
	}
	return t.pieceData[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// rendered returns what Decode writes for id when it follows prev (-1 at
// the start): nothing for control and unknown tokens; for SentencePiece
// vocabularies with a space prefix, the piece without its first space when
// the token starts the sequence or follows BOS, undoing the space Encode
// put there.
func (t *Tokenizer) rendered(id, prev int32) []byte {
	typ := t.TokenType(id)
	if typ == TypeControl || typ == TypeUnknown {
		return nil
	}
	p := t.piece(id)
	if t.addSpacePrefix && (prev < 0 || prev == t.bos) && len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	return p
}

// Decode returns the text of ids: the concatenated pieces (see Piece), with
// two exceptions. Control and unknown tokens (BOS, EOS, "<|im_end|>",
// "<unk>") give nothing; use Piece to show them. For "llama" vocabularies
// with a space prefix, a token at the start of ids, or right after BOS,
// loses one leading space, as SentencePiece and llama2.c decode. Ids out of
// range give nothing. The result may be invalid UTF-8 when the ids cut a
// character short; bytes are never replaced.
//
// Round trip: for "gpt2", Decode(Encode(s, o)) == s for every byte string s
// when o.ParseSpecial is false and the vocabulary has no user-defined
// tokens. For "llama" with a space prefix the same holds for every s that
// contains no U+2581 (Encode writes spaces as U+2581, so Decode turns an
// input U+2581 into a space), with or without AddSpecial, provided "▁" is a
// token. llama.cpp's own decoder differs here: it strips the first space
// only when BOS is not in ids, and for most "gpt2" pre-tokenizers it also
// removes spaces before punctuation ("clean_spaces"); Decode does neither.
func (t *Tokenizer) Decode(ids []int32) string {
	b := make([]byte, 0, 4*len(ids))
	prev := int32(-1)
	for _, id := range ids {
		b = append(b, t.rendered(id, prev)...)
		prev = id
	}
	return string(b)
}

// NewDecoder returns a StreamDecoder for a new sequence.
func (t *Tokenizer) NewDecoder() *StreamDecoder {
	return &StreamDecoder{t: t, prev: -1}
}

// NewDecoderAfter returns a StreamDecoder for ids that continue a sequence
// whose last token is prev (the last prompt token when decoding a
// generation), so the first piece keeps or loses its leading space exactly
// as it would inside Decode of the whole sequence.
func (t *Tokenizer) NewDecoderAfter(prev int32) *StreamDecoder {
	return &StreamDecoder{t: t, prev: prev}
}

// StreamDecoder turns ids into text one at a time, as a model generates
// them. It holds back the bytes of a character that is not complete yet,
// so every chunk it returns ends on a character boundary: a byte-fallback
// or byte-level character split over several tokens comes out whole in one
// chunk. Bytes that can never become valid UTF-8 are passed on as they are
// (never replaced), so the concatenation of every Add and the final Flush
// equals Decode of all the ids, byte for byte.
//
// A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	prev    int32
	pending []byte
}

// Add decodes id and returns the text that is now complete, possibly "".
// It follows Decode's rules, so a first token after BOS (or first at all)
// loses the SentencePiece space prefix.
func (d *StreamDecoder) Add(id int32) string {
	d.pending = append(d.pending, d.t.rendered(id, d.prev)...)
	d.prev = id
	cut := completePrefix(d.pending)
	if cut == 0 {
		return ""
	}
	s := string(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return s
}

// Flush returns whatever Add held back (at most 3 bytes of a character cut
// short, as raw bytes) and resets the decoder for a new sequence.
func (d *StreamDecoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	d.prev = -1
	return s
}

// completePrefix returns the length of the longest prefix of p that does
// not end inside a UTF-8 sequence that may still be completed: it keeps back
// a final lead byte and the continuation bytes after it when together they
// are a proper, valid start of a character.
func completePrefix(p []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(p); back++ {
		i := len(p) - back
		c := p[i]
		if c < utf8.RuneSelf {
			return len(p) // ASCII: everything before and at it is complete
		}
		if !utf8.RuneStart(c) {
			continue // a continuation byte: look further back for its lead
		}
		if utf8.FullRune(p[i:]) {
			return len(p) // complete, or invalid in a way more bytes cannot fix
		}
		return i
	}
	return len(p)
}

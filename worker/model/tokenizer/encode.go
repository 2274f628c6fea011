package tokenizer

// EncodeOptions controls Encode.
type EncodeOptions struct {
	// AddSpecial puts BOS first and EOS last when the vocabulary asks for
	// them (tokenizer.ggml.add_bos_token, add_eos_token, or their defaults:
	// see AddsBOS). Leave it false for text that continues a sequence, or
	// whose chat template already writes the BOS marker.
	AddSpecial bool
	// ParseSpecial turns exact occurrences of control-token texts in the
	// input ("<|im_start|>", "<s>", "<unk>") into those tokens; where several
	// match at one place the longest wins, and the leftmost occurrence is
	// taken first. With ParseSpecial false such text is tokenized as plain
	// text, so user input cannot forge control tokens.
	//
	// User-defined tokens (TypeUserDefined) are matched whatever this flag
	// says, as llama.cpp and Hugging Face tokenizers do.
	ParseSpecial bool
	// Continues says the text continues a sequence, after a token that
	// is not special: SentencePiece puts no space in front of it (a
	// draft of text the output is forced to take next).
	Continues bool
}

// plain reports whether merging may produce token id: not a control,
// unknown or byte token, whose text plain input must not turn into (llama.cpp
// does not check; the vocabularies it ships have no merge chain that
// reaches one). So text never becomes a control token unless ParseSpecial
// matched it, and Decode gives it back.
func (t *Tokenizer) plain(id int32) bool {
	switch t.types[id] {
	case TypeControl, TypeUnknown, TypeByte:
		return false
	}
	return true
}

// scratch holds the buffers one Encode call reuses across fragments and
// words; Tokenizer keeps a pool of them.
type scratch struct {
	buf     []byte
	spmSyms []spmSymbol
	bpeSyms []bpeSymbol
	heap    []pair
}

// Encode returns the token ids of text.
//
// "llama" (SentencePiece): spaces become U+2581, a space is put in front of
// the text (and after every special token matched in it) when the vocabulary
// has add_space_prefix (the default), then the pieces are merged by score,
// and bytes that no token covers fall back to "<0xXX>" tokens. "gpt2": the
// text is cut into words by the pre-tokenizer, each word's bytes are mapped
// to the GPT-2 alphabet and merged by rank. Both run in O(n log n) for n
// input bytes. "bert" (WordPiece): see wpmEncode; AddSpecial puts [CLS]
// first and [SEP] last.
//
// Any byte string is accepted, including invalid UTF-8: its bytes are
// carried by byte tokens, so Decode gives them back (see Decode for the
// exact round-trip property).
func (t *Tokenizer) Encode(text string, o EncodeOptions) []int32 {
	sc := t.scratch.Get().(*scratch)
	defer t.scratch.Put(sc)

	out := make([]int32, 0, len(text)/4+4)
	if o.AddSpecial && t.addBOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	// afterSpecial: the fragment is at the start or follows a special
	// token, so SentencePiece puts a space in front of it.
	afterSpecial := !o.Continues
	fragment := func(s string) {
		switch t.model {
		case ModelSPM:
			out = t.spmEncode(out, s, afterSpecial && t.addSpacePrefix, sc)
		case ModelWPM:
			out = t.wpmEncode(out, s, sc)
		default:
			t.preTok.split(s, 0, len(s), func(lo, hi int) {
				out = t.bpeWord(out, s[lo:hi], sc)
			})
		}
		afterSpecial = false
	}
	last := 0
	if t.special.possible(o.ParseSpecial) {
		for p := 0; p < len(text); {
			id, n := t.special.match(text, p, o.ParseSpecial)
			if n == 0 {
				p++
				continue
			}
			if last < p {
				fragment(text[last:p])
			}
			out = append(out, id)
			afterSpecial = true
			p += n
			last = p
		}
	}
	if last < len(text) {
		fragment(text[last:])
	}
	if o.AddSpecial && t.addEOS && t.eos >= 0 {
		out = append(out, t.eos)
	}
	if o.AddSpecial && t.addSEP && t.sep >= 0 {
		out = append(out, t.sep)
	}
	return out
}

// specialMatcher finds special-token texts in the input: a byte trie of
// the texts of control, unknown and user-defined tokens.
type specialMatcher struct {
	nodes []trieNode
	first [256]bool // bytes that start some special text
	nUser int       // how many user-defined tokens are in the trie
}

type trieNode struct {
	edges []trieEdge
	id    int32 // token whose text ends here, or -1
	user  bool  // that token is user-defined
}

type trieEdge struct {
	b  byte
	to int32
}

// loadSpecial fills the matcher.
func (t *Tokenizer) loadSpecial() {
	m := &t.special
	m.nodes = []trieNode{{id: -1}}
	for i, s := range t.tokens {
		typ := t.types[i]
		if s == "" || (typ != TypeControl && typ != TypeUnknown && typ != TypeUserDefined) {
			continue
		}
		if t.toID[s] != int32(i) {
			continue // a duplicate text: the first id wins, as in Lookup
		}
		cur := int32(0)
		for j := 0; j < len(s); j++ {
			next := int32(-1)
			for _, e := range m.nodes[cur].edges {
				if e.b == s[j] {
					next = e.to
					break
				}
			}
			if next < 0 {
				next = int32(len(m.nodes))
				m.nodes = append(m.nodes, trieNode{id: -1})
				m.nodes[cur].edges = append(m.nodes[cur].edges, trieEdge{s[j], next})
			}
			cur = next
		}
		m.nodes[cur].id = int32(i)
		m.nodes[cur].user = typ == TypeUserDefined
		m.first[s[0]] = true
		if typ == TypeUserDefined {
			m.nUser++
		}
	}
}

// possible reports whether any match can be found.
func (m *specialMatcher) possible(all bool) bool {
	if all {
		return len(m.nodes) > 1
	}
	return m.nUser > 0
}

// match returns the longest special token whose text starts at text[p] and
// its length, or (-1, 0). With all false only user-defined tokens count.
func (m *specialMatcher) match(text string, p int, all bool) (int32, int) {
	if !m.first[text[p]] {
		return -1, 0
	}
	best, bestLen := int32(-1), 0
	cur := int32(0)
	for j := p; j < len(text); j++ {
		next := int32(-1)
		for _, e := range m.nodes[cur].edges {
			if e.b == text[j] {
				next = e.to
				break
			}
		}
		if next < 0 {
			break
		}
		cur = next
		if nd := &m.nodes[cur]; nd.id >= 0 && (all || nd.user) {
			best, bestLen = nd.id, j+1-p
		}
	}
	return best, bestLen
}

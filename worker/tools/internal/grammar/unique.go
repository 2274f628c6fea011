package grammar

import (
	"encoding/binary"
	"encoding/json"
	"math/big"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// uniqueItems of scalars: an array frame keeps the canonical values of its
// string, number, boolean and null items in its txt, each as a length
// prefix and the value's key, so that an item equal to an earlier one
// cannot end (the closing quote, the byte after a number, the last byte of
// a literal are refused). A string item keeps its raw text in its own txt;
// its masks still come from the leaf caches, whose exits (tokens that
// close it) are checked one by one with quotePaths. Keys: "s" and the decoded string, "n" and the
// number as an exact fraction (1, 1.0 and 1e0 are one value), "t", "f",
// "z" for true, false and null.

// itemKey returns the key of the finished item frame f (payload: the value
// index of a literal), or "" for an item the array does not compare (an
// object or array literal).
func itemKey(f *frame, payload int32) string {
	switch f.kind {
	case fString:
		return "s" + decodeStringBody(f.txt)
	case fNumber:
		return numberKey(f.txt)
	case fLit:
		if payload < 0 || int(payload) >= len(f.n.Literal.Values) {
			return ""
		}
		switch v := f.n.Literal.Values[payload].(type) {
		case string:
			return "s" + v
		case json.Number:
			return numberKey(string(v))
		case bool:
			if v {
				return "t"
			}
			return "f"
		case nil:
			return "z"
		}
	}
	return ""
}

func numberKey(text string) string {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return "n" + text
	}
	return "n" + r.RatString()
}

// uniqueHas reports whether the key set set holds k.
func uniqueHas(set, k string) bool {
	for len(set) > 0 {
		n, w := binary.Uvarint([]byte(set[:min(len(set), binary.MaxVarintLen64)]))
		if w <= 0 {
			return false
		}
		set = set[w:]
		if int(n) == len(k) && set[:n] == k {
			return true
		}
		set = set[n:]
	}
	return false
}

// uniqueAdd returns set with k added.
func uniqueAdd(set, k string) string {
	var b [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(b[:], uint64(len(k)))
	return set + string(b[:w]) + k
}

// decodeStringBody decodes the body of a JSON string the grammar accepted
// (escapes are well formed; \u escapes are never surrogates).
func decodeStringBody(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			b.WriteByte(c)
			continue
		}
		i++
		if raw[i] == 'u' && i+4 < len(raw) {
			var r rune
			for _, h := range []byte(raw[i+1 : i+5]) {
				r = r<<4 | rune(HexValue(h))
			}
			var buf [utf8.UTFMax]byte
			b.Write(buf[:utf8.EncodeRune(buf[:], r)])
			i += 4
			continue
		}
		d, _ := escByte(raw[i])
		b.WriteByte(d)
	}
	return b.String()
}

// quotePaths maps the trie nodes of closing quotes to the bytes before
// them in their token, so that a string leaf's exit (cached without the
// string's text) can be checked against the items an array holds. Built
// once per machine, on first use; only special tokens hold a quote.
type quotePaths struct {
	once sync.Once
	text map[int32]string
}

// before returns the bytes on the trie path to node, without node's own
// byte (a closing quote).
func (q *quotePaths) before(vi *vocab.Index, node int32) string {
	q.once.Do(func() {
		q.text = map[int32]string{}
		for i, tok := range vi.Special {
			p := vi.Pieces[tok]
			for k, n := range vi.SpecialNodes[i] {
				if p[k] == '"' {
					if _, ok := q.text[n]; !ok {
						q.text[n] = string(p[:k])
					}
				}
			}
		}
	})
	return q.text[node]
}

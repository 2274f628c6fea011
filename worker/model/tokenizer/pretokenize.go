package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// A splitter cuts text[lo:hi] into consecutive pieces that together cover
// it, calling emit for each non-empty piece in order. It never looks outside
// [lo, hi): the end of the range is the end of the text for any lookahead,
// as it is for a regex applied to one fragment.
//
// The splitters below reproduce, by hand, the pre-tokenizer regexes that
// llama.cpp applies for each tokenizer.ggml.pre value. Go's regexp has no
// lookahead, so each regex is written as a scanner over runes. A byte that
// is not part of valid UTF-8 counts as one character of its own that is
// neither a letter, a number nor white space (llama.cpp would first replace
// it with U+FFFD, which falls in the same class; keeping the byte lets any
// input survive a round trip).
type splitter func(text string, lo, hi int, emit func(lo, hi int))

// Character classes used by the scanners.
const (
	clsOther  uint8 = iota // anything else: punctuation, symbols, controls, invalid bytes
	clsLetter              // \p{L}
	clsNumber              // \p{N}
	clsSpace               // \s: the Unicode White_Space property
	clsNone                // past the end of the range
)

// asciiClass holds the class of every ASCII byte.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		t[b] = classOfRune(rune(b))
	}
	return t
}()

func classOfRune(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// classAt returns the class of the character at text[p] within [.., hi) and
// its length in bytes; clsNone and 0 at or past hi.
func classAt(text string, p, hi int) (uint8, int) {
	if p >= hi {
		return clsNone, 0
	}
	if b := text[p]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(text[p:hi])
	if r == utf8.RuneError && n == 1 {
		return clsOther, 1
	}
	return classOfRune(r), n
}

// isPunctAt reports whether the character at text[p] is \p{P}, and its
// length; extra lists ASCII symbols that also count.
func isPunctAt(text string, p, hi int, extra string) (bool, int) {
	if b := text[p]; b < utf8.RuneSelf {
		if unicode.IsPunct(rune(b)) {
			return true, 1
		}
		for i := 0; i < len(extra); i++ {
			if extra[i] == b {
				return true, 1
			}
		}
		return false, 1
	}
	r, n := utf8.DecodeRuneInString(text[p:hi])
	if r == utf8.RuneError && n == 1 {
		return false, 1
	}
	return unicode.IsPunct(r), n
}

// splitGPT2 implements the GPT-2 pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(text string, lo, hi int, emit func(lo, hi int)) {
	pos := lo
	for pos < hi {
		if n := contraction(text, pos, hi, false); n > 0 {
			emit(pos, pos+n)
			pos += n
			continue
		}
		cls, n := classAt(text, pos, hi)
		// The class that decides the branch is the one after an optional
		// leading U+0020.
		body, cls2 := pos, cls
		if text[pos] == ' ' {
			body = pos + 1
			cls2, _ = classAt(text, body, hi)
		}
		switch cls2 {
		case clsLetter, clsNumber, clsOther:
			end := body
			for {
				c, m := classAt(text, end, hi)
				if c != cls2 {
					break
				}
				end += m
			}
			emit(pos, end)
			pos = end
			continue
		}
		if cls != clsSpace {
			// Unreachable (a non-space character always takes a branch
			// above), kept so that the loop always advances.
			emit(pos, pos+n)
			pos += n
			continue
		}
		pos = splitSpaces(text, pos, hi, false, emit)
	}
}

// splitLlama3 implements the Llama 3 pattern, with maxDigits 3:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and, with maxDigits 1, the Qwen 2 pattern, which differs only in \p{N}.
func splitLlama3(maxDigits int) splitter {
	return func(text string, lo, hi int, emit func(lo, hi int)) {
		pos := lo
		for pos < hi {
			if n := contraction(text, pos, hi, true); n > 0 {
				emit(pos, pos+n)
				pos += n
				continue
			}
			c := text[pos]
			cls, n := classAt(text, pos, hi)

			// [^\r\n\p{L}\p{N}]?\p{L}+
			if c != '\r' && c != '\n' && cls != clsNumber {
				next, _ := classAt(text, pos+n, hi)
				if cls == clsLetter || next == clsLetter {
					end := pos + n
					for {
						k, m := classAt(text, end, hi)
						if k != clsLetter {
							break
						}
						end += m
					}
					emit(pos, end)
					pos = end
					continue
				}
			}

			// \p{N}{1,maxDigits}: one group; the loop comes back for the next.
			if cls == clsNumber {
				start := pos
				for count := 0; count < maxDigits; count++ {
					k, m := classAt(text, pos, hi)
					if k != clsNumber {
						break
					}
					pos += m
				}
				emit(start, pos)
				continue
			}

			// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
			body, cls2 := pos, cls
			if c == ' ' {
				body = pos + 1
				cls2, _ = classAt(text, body, hi)
			}
			if cls2 == clsOther || cls2 == clsNone {
				end := body
				for {
					k, m := classAt(text, end, hi)
					if k != clsOther {
						break
					}
					end += m
				}
				for end < hi && (text[end] == '\r' || text[end] == '\n') {
					end++
				}
				emit(pos, end)
				pos = end
				continue
			}

			pos = splitSpaces(text, pos, hi, true, emit)
		}
	}
}

// splitSpaces matches the white-space alternatives at text[pos], which must
// be white space, emits the match and returns the position after it. With
// newlines set it first tries \s*[\r\n]+ (the Llama 3 pattern); then
// \s+(?!\S) and \s+.
func splitSpaces(text string, pos, hi int, newlines bool, emit func(lo, hi int)) int {
	end, lastStart, afterNL, count := pos, pos, -1, 0
	for {
		k, m := classAt(text, end, hi)
		if k != clsSpace {
			break
		}
		if text[end] == '\r' || text[end] == '\n' {
			afterNL = end + 1
		}
		lastStart = end
		end += m
		count++
	}
	switch {
	case newlines && afterNL > 0:
		// \s*[\r\n]+: backtracking gives the longest run that ends with a
		// newline character.
		end = afterNL
	case count > 1 && end < hi:
		// \s+(?!\S): leave the last white-space character for the token that
		// follows it.
		end = lastStart
	}
	emit(pos, end)
	return end
}

// contraction returns the length of 's, 't, 're, 've, 'm, 'll or 'd at
// text[pos], or 0. With fold set the letters match in either case.
func contraction(text string, pos, hi int, fold bool) int {
	if text[pos] != '\'' || pos+1 >= hi {
		return 0
	}
	lower := func(b byte) byte {
		if fold && 'A' <= b && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	switch lower(text[pos+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if pos+2 < hi {
		a, b := lower(text[pos+1]), lower(text[pos+2])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return 3
		}
	}
	return 0
}

// splitMatches returns a splitter for a pattern whose matches are found by
// match (the length of the match at p, or 0), keeping the text between
// matches as pieces of their own, as llama.cpp does when it applies one
// regex of a sequence.
func splitMatches(match func(text string, p, hi int) int) splitter {
	return func(text string, lo, hi int, emit func(lo, hi int)) {
		gap := lo
		for p := lo; p < hi; {
			if n := match(text, p, hi); n > 0 {
				if gap < p {
					emit(gap, p)
				}
				emit(p, p+n)
				p += n
				gap = p
				continue
			}
			_, n := classAt(text, p, hi)
			p += n
		}
		if gap < hi {
			emit(gap, hi)
		}
	}
}

// matchDigit matches \p{N}: one number character.
func matchDigit(text string, p, hi int) int {
	if k, n := classAt(text, p, hi); k == clsNumber {
		return n
	}
	return 0
}

// matchDigits matches \p{N}+.
func matchDigits(text string, p, hi int) int {
	end := p
	for {
		k, n := classAt(text, end, hi)
		if k != clsNumber {
			return end - p
		}
		end += n
	}
}

// matchThreeASCIIDigits matches [0-9][0-9][0-9].
func matchThreeASCIIDigits(text string, p, hi int) int {
	if p+3 <= hi && isASCIIDigit(text[p]) && isASCIIDigit(text[p+1]) && isASCIIDigit(text[p+2]) {
		return 3
	}
	return 0
}

func isASCIIDigit(b byte) bool { return '0' <= b && b <= '9' }

// matchPunct returns a matcher for [\p{P}<extra>]+.
func matchPunct(extra string) func(text string, p, hi int) int {
	return func(text string, p, hi int) int {
		end := p
		for end < hi {
			ok, n := isPunctAt(text, end, hi, extra)
			if !ok {
				break
			}
			end += n
		}
		return end - p
	}
}

// chain applies the splitters in sequence: each piece of one is cut again
// by the next, as llama.cpp applies a list of regexes.
func chain(fs ...splitter) splitter {
	if len(fs) == 1 {
		return fs[0]
	}
	first, rest := fs[0], chain(fs[1:]...)
	return func(text string, lo, hi int, emit func(lo, hi int)) {
		first(text, lo, hi, func(l, h int) { rest(text, l, h, emit) })
	}
}

// preTokenizer describes how one tokenizer.ggml.pre value splits text.
type preTokenizer struct {
	split splitter
	// ignoreMerges: a word that is itself in the vocabulary becomes that
	// token without running the merges (Llama 3 and similar).
	ignoreMerges bool
	// addBOS is the default for tokenizer.ggml.add_bos_token.
	addBOS bool
}

var (
	preGPT2      = preTokenizer{split: splitGPT2}
	preLlama3    = preTokenizer{split: splitLlama3(3), ignoreMerges: true, addBOS: true}
	preLlama3Std = preTokenizer{split: splitLlama3(3)}
	preQwen2     = preTokenizer{split: splitLlama3(1)}
	preStarcoder = preTokenizer{split: chain(splitMatches(matchDigit), splitGPT2)}
	preFalcon    = preTokenizer{split: chain(splitMatches(matchPunct("$+<=>^~|`")), splitGPT2, splitMatches(matchThreeASCIIDigits))}
	preDefault   = preTokenizer{split: chain(
		splitMatches(matchPunct("$+<=>^~|")),
		splitGPT2,
		splitMatches(matchDigits),
		splitMatches(matchThreeASCIIDigits),
	)}
)

// preTokenizers maps the tokenizer.ggml.pre values this package knows to
// their pre-tokenizer, grouped as llama.cpp groups them. A missing or empty
// value means "default".
var preTokenizers = map[string]preTokenizer{
	"default": preDefault,

	"gpt-2": preGPT2, "phi-2": preGPT2, "jina-es": preGPT2, "jina-de": preGPT2,
	"gigachat": preGPT2, "jina-v2-es": preGPT2, "jina-v2-de": preGPT2,
	"a.x-4.0": preGPT2, "mellum": preGPT2, "mpt": preGPT2, "olmo": preGPT2,
	"jais": preGPT2, "trillion": preGPT2, "granite-docling": preGPT2, "exaone4": preGPT2,

	"llama3": preLlama3, "llama-v3": preLlama3, "llama-bpe": preLlama3,
	"falcon3": preLlama3, "falcon-h1": preLlama3, "pixtral": preLlama3,
	"midm-2.0": preLlama3, "lfm2": preLlama3,
	"dbrx": preLlama3Std, "smaug-bpe": preLlama3Std,

	"qwen2": preQwen2, "deepseek-r1-qwen": preQwen2, "kormo": preQwen2,
	"megrez": preQwen2, "stablelm2": preQwen2, "hunyuan": preQwen2, "grok-2": preQwen2,

	"starcoder": preStarcoder, "refact": preStarcoder, "command-r": preStarcoder,
	"smollm": preStarcoder, "codeshell": preStarcoder, "exaone": preStarcoder,
	"minerva-7b": preStarcoder,

	"falcon": preFalcon,
}

package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Document is one synthetic document of the documents benchmark.
type Document struct {
	// Index is the document's place in the corpus, from 0: the order the
	// benchmark sends them in.
	Index int
	// Text is the document: sentences of common English words in
	// paragraphs.
	Text string
	// Tokens is the length of Text alone in the tokens of the model's
	// tokenizer (no BOS, no chat template).
	Tokens int
}

// GenerateDocuments returns n documents whose lengths, measured with
// count (the model's tokenizer), are drawn uniformly from [minTokens,
// maxTokens]. The same n, range and seed give the same documents; count
// only decides where each one stops. A document's words are drawn from a
// fixed list of common words, so that on any tokenizer a word is a few
// tokens at most and the length can be cut to the target word by word.
func GenerateDocuments(n, minTokens, maxTokens int, seed uint64, count func(string) int) ([]Document, error) {
	switch {
	case n <= 0:
		return nil, fmt.Errorf("bench: %d documents: want 1 or more", n)
	case minTokens <= 0 || maxTokens < minTokens:
		return nil, fmt.Errorf("bench: document tokens %d-%d: want 1 ≤ MIN ≤ MAX", minTokens, maxTokens)
	case count == nil:
		return nil, fmt.Errorf("bench: documents need a token counter (the model's tokenizer)")
	}
	g := &corpus{count: count, cost: map[string]int{}}
	docs := make([]Document, n)
	for i := range docs {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		target := minTokens + r.IntN(maxTokens-minTokens+1)
		text, tokens, err := g.document(r, target, minTokens, maxTokens)
		if err != nil {
			return nil, fmt.Errorf("bench: document %d: %w", i, err)
		}
		docs[i] = Document{Index: i, Text: text, Tokens: tokens}
	}
	return docs, nil
}

// corpus writes documents, caching what each unit of text (a word with
// the space or break before it and its punctuation) costs in tokens.
type corpus struct {
	count func(string) int
	cost  map[string]int
	// maxCost is the most tokens a unit has cost.
	maxCost int
}

// unitCost is the tokens of u, counted once.
func (g *corpus) unitCost(u string) int {
	c, ok := g.cost[u]
	if !ok {
		c = max(g.count(u), 1)
		g.cost[u] = c
		g.maxCost = max(g.maxCost, c)
	}
	return c
}

// document writes units drawn from r until their summed cost reaches
// target, then counts the whole text and adds or removes units until its
// true count is in [lo, hi] (the sum differs from it only where
// neighbouring units merge), closing the last gap with the cheapest word.
func (g *corpus) document(r *rand.Rand, target, lo, hi int) (string, int, error) {
	var units []string
	sum := 0
	sentence, paragraph := 0, 0 // words left in the sentence, sentences in the paragraph
	next := func() string {
		w := lexicon[r.IntN(len(lexicon))]
		var u string
		switch {
		case len(units) == 0:
			u = capitalize(w)
			sentence, paragraph = 6+r.IntN(13), 3+r.IntN(5)
		case sentence == 0 && paragraph == 0:
			u = "\n\n" + capitalize(w)
			sentence, paragraph = 6+r.IntN(13), 3+r.IntN(5)
		case sentence == 0:
			u = " " + capitalize(w)
			sentence = 6 + r.IntN(13)
		default:
			u = " " + w
		}
		sentence--
		if sentence == 0 {
			u += "."
			paragraph = max(paragraph-1, 0)
		}
		return u
	}
	for sum < target {
		u := next()
		units = append(units, u)
		sum += g.unitCost(u)
	}
	// The cheapest word, to close the last gap token by token.
	filler := ""
	for _, w := range []string{" a", " of", " the"} {
		if filler == "" || g.unitCost(w) < g.unitCost(filler) {
			filler = w
		}
	}
	for range 512 {
		text := strings.Join(units, "")
		n := g.count(text)
		switch {
		case n >= lo && n <= hi:
			return text, n, nil
		case n < lo && lo-n <= 2*g.maxCost:
			units = append(units, filler)
		case n < lo:
			for s := n; s < lo-g.maxCost; {
				u := next()
				units = append(units, u)
				s += g.unitCost(u)
			}
		default:
			for s := n; s > hi && len(units) > 1; {
				s -= g.unitCost(units[len(units)-1])
				units = units[:len(units)-1]
			}
		}
	}
	return "", 0, fmt.Errorf("no length in %d-%d tokens found (the tokenizer counts a word as more than the range is wide)", lo, hi)
}

// capitalize upper-cases w's first letter.
func capitalize(w string) string {
	c, n := utf8.DecodeRuneInString(w)
	return string(unicode.ToUpper(c)) + w[n:]
}

// lexicon is the words of the synthetic documents: common English words,
// most of them one token in the vocabularies of real models.
var lexicon = strings.Fields(`
the of and to in is was for on that with as by at from this which be are it
an or have has had not but all were they their one more new other some time
year years first two after also many most city state area report system data
water power market price order page section table figure note chapter value
member group company service program project plan policy board council office
house school court road river station park building center line level number
rate cost money tax budget account payment contract supply product process
method model result study test sample range period season month week day
north south east west local national public private general early late small
large high low long short main major minor simple common special total annual
review summary record list index form letter manual story article paper book
design build run use make show give take find keep move start end open close
change increase reduce improve include provide require support follow produce
`)

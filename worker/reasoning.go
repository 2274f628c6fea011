package worker

import (
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
)

// The tags a thinking model writes around its reasoning.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// reasoningSplit separates a thinking model's output, as it streams, into
// its reasoning (the text of a <think>…</think> block at the start of the
// output) and its answer (the rest, without the blank lines after the
// block). Text that does not open with the block (leading white space
// aside) is all answer. A tag split across two pieces is held back until
// the next piece shows what it is, so every piece of text goes to exactly
// one side, once: Push's outputs, and Flush's at the end, put together
// are the whole output less the two tags and the white space around them.
type reasoningSplit struct {
	state int    // splitStart, splitThinking or splitAnswer
	hold  string // text held back: it may be the start of a tag
	// answerStarted is set once the answer has had a non-space byte.
	answerStarted bool
}

const (
	splitStart = iota
	splitThinking
	splitAnswer
)

// Push takes the next piece of output and returns what of it, and of what
// was held back, is now known to be reasoning and answer.
func (s *reasoningSplit) Push(text string) (reasoning, answer string) {
	s.hold += text
	var r, a strings.Builder
	for {
		switch s.state {
		case splitStart:
			t := strings.TrimLeft(s.hold, " \t\r\n")
			switch {
			case strings.HasPrefix(t, thinkOpen):
				s.hold, s.state = t[len(thinkOpen):], splitThinking
				continue
			case strings.HasPrefix(thinkOpen, t):
				return r.String(), a.String() // white space or a part of the tag so far
			}
			s.state = splitAnswer
			continue
		case splitThinking:
			if i := strings.Index(s.hold, thinkClose); i >= 0 {
				r.WriteString(s.hold[:i])
				s.hold, s.state = s.hold[i+len(thinkClose):], splitAnswer
				continue
			}
			keep := partialSuffix(s.hold, thinkClose)
			r.WriteString(s.hold[:len(s.hold)-keep])
			s.hold = s.hold[len(s.hold)-keep:]
			return r.String(), a.String()
		case splitAnswer:
			if !s.answerStarted {
				s.hold = strings.TrimLeft(s.hold, " \t\r\n")
				if s.hold == "" {
					return r.String(), a.String()
				}
				s.answerStarted = true
			}
			a.WriteString(s.hold)
			s.hold = ""
			return r.String(), a.String()
		}
	}
}

// Flush returns what is still held back at the end of the output: an
// unclosed block's last piece is reasoning; text that never became a tag
// is answer.
func (s *reasoningSplit) Flush() (reasoning, answer string) {
	h := s.hold
	s.hold = ""
	switch s.state {
	case splitThinking:
		return h, ""
	case splitStart:
		if strings.TrimSpace(h) == "" {
			return "", ""
		}
		return "", strings.TrimLeft(h, " \t\r\n")
	}
	if !s.answerStarted {
		h = strings.TrimLeft(h, " \t\r\n")
	}
	return "", h
}

// partialSuffix returns the length of the longest suffix of s that is a
// proper prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// splitReasoning separates a whole output as reasoningSplit does: the
// reasoning of its opening <think>…</think> block, trimmed, and the answer.
func splitReasoning(text string) (reasoning, answer string) {
	var s reasoningSplit
	r, a := s.Push(text)
	r2, a2 := s.Flush()
	return strings.TrimSpace(r + r2), a + a2
}

// SplitThinking wraps sink for a thinking job: the text of each Delta is
// split (reasoningSplit) into the reasoning, passed to sink's Reasoning
// when it is a ReasoningSink, and the answer, passed to its Delta with
// all the token ids. Call finish when the output has ended: it passes on
// what was held back.
func SplitThinking(sink Sink) (wrapped Sink, finish func()) {
	t := &thinkingSink{Sink: sink}
	return t, t.finish
}

// SplitReasoning separates a thinking job's whole output into its
// reasoning (trimmed) and its answer, as SplitThinking does piece by piece.
func SplitReasoning(text string) (reasoning, answer string) { return splitReasoning(text) }

type thinkingSink struct {
	Sink
	split reasoningSplit
}

func (t *thinkingSink) Delta(text string, ids []int32, lps []contracts.TokenLogprob) {
	r, a := t.split.Push(text)
	t.pass(r, a, ids, lps)
}

func (t *thinkingSink) finish() {
	r, a := t.split.Flush()
	if r != "" || a != "" {
		t.pass(r, a, nil, nil)
	}
}

func (t *thinkingSink) pass(r, a string, ids []int32, lps []contracts.TokenLogprob) {
	if r != "" {
		if rs, ok := t.Sink.(ReasoningSink); ok {
			rs.Reasoning(r)
		}
	}
	t.Sink.Delta(a, ids, lps)
}

package chat

import "strings"

// Reasoning markers of the thinking models (Qwen3, DeepSeek-R1 and their
// distillations).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// ReasoningSplitter separates a thinking model's output, as it streams,
// into its reasoning (the text of a <think>…</think> block that opens the
// output, white space before it aside) and its answer (the rest, less the
// white space right after the block). Output that does not open with the
// block is all answer, and later tags are answer text. A tag cut across
// two pieces is held back until the next piece shows what it is, so each
// byte of the output goes to one side, once: the outputs of Push, and of
// Flush at the end, put together are the whole output less the tags, the
// white space before the block and that after it, and a close tag cut
// short by the end of the output. The zero value is ready to use.
type ReasoningSplitter struct {
	state int    // splitStart, splitThinking or splitAnswer
	hold  string // text held back: it may be the start of a tag
	// answerStarted is set once the answer has had a byte that is not
	// white space.
	answerStarted bool
}

const (
	splitStart = iota
	splitThinking
	splitAnswer
)

// Push takes the next piece of output and returns what of it, and of what
// was held back, is now known to be reasoning and answer.
func (s *ReasoningSplitter) Push(text string) (reasoning, answer string) {
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
		default: // splitAnswer
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

// Flush returns what is still held back at the end of the output: in an
// unclosed block, a partial close tag is dropped (the output stopped in
// it); text that never became a tag is answer.
func (s *ReasoningSplitter) Flush() (reasoning, answer string) {
	h := s.hold
	s.hold = ""
	switch s.state {
	case splitThinking:
		return "", "" // only a proper prefix of </think> is ever held here
	case splitStart:
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

// SplitReasoning splits a model's whole generated text as a
// ReasoningSplitter does piece by piece, into its reasoning, less the
// newlines at its ends, and its answer:
//
//   - No block at the start: everything is answer ("", text).
//   - "<think>" without "</think>" (generation stopped inside the block):
//     everything after the tag is reasoning, less a trailing partial
//     "</think>" ("</th"), and the answer is empty.
//   - Only the first block is split off; later tags stay in the answer.
func SplitReasoning(text string) (reasoning, answer string) {
	var s ReasoningSplitter
	r, a := s.Push(text)
	r2, a2 := s.Flush()
	return strings.Trim(r+r2, "\n"), a + a2
}

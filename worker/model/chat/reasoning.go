package chat

import "strings"

// Reasoning markers of the thinking models (Qwen3, DeepSeek-R1 and their
// distillations).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// SplitReasoning splits a model's generated text into its reasoning, the text
// inside "<think>…</think>", and its answer, the text after it, as the Qwen3
// template does when it reads an assistant turn back: the reasoning loses the
// newlines at its ends, the answer those at its start.
//
//   - No tags: everything is answer ("", text).
//   - "<think>" without "</think>" (generation stopped, or is still
//     running): everything after the tag is reasoning, less a trailing
//     partial "</think>" ("</th"), and the answer is empty.
//   - "</think>" without "<think>" (the prompt opened the block, as some
//     templates do): the text before it is reasoning.
//   - Text before "<think>" that is not white space stays in the answer,
//     ahead of the text after "</think>".
//
// Only the first block is split off; later tags stay in the answer.
func SplitReasoning(text string) (reasoning, answer string) {
	open := strings.Index(text, thinkOpen)
	end0 := strings.Index(text, thinkClose)
	switch {
	case open < 0 && end0 < 0:
		return "", text
	case open < 0 || (end0 >= 0 && end0 < open):
		// Closed only: the block was opened by the prompt.
		return strings.Trim(text[:end0], "\n"), strings.TrimLeft(text[end0+len(thinkClose):], "\n")
	}
	before := text[:open]
	if strings.TrimSpace(before) == "" {
		before = ""
	}
	rest := text[open+len(thinkOpen):]
	end := strings.Index(rest, thinkClose)
	if end < 0 {
		return strings.Trim(trimPartial(rest, thinkClose), "\n"), before
	}
	return strings.Trim(rest[:end], "\n"), before + strings.TrimLeft(rest[end+len(thinkClose):], "\n")
}

// trimPartial removes from the end of s the longest proper prefix of tag
// that s ends with.
func trimPartial(s, tag string) string {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return s[:len(s)-n]
		}
	}
	return s
}

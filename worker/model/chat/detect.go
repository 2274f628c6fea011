package chat

import (
	"strings"
	"unicode/utf8"
)

// excerptRunes bounds the template excerpt quoted in an UnknownTemplateError.
const excerptRunes = 48

// Detect returns the template family whose markers appear in tmpl, the Jinja
// source from a GGUF file's tokenizer.chat_template. The checks, in order:
//
//   - llama3: both "<|start_header_id|>" and "<|eot_id|>";
//   - chatml: "<|im_start|>";
//   - zephyr: "<|user|>" and "<|assistant|>", the end marker written as "</s>"
//     or as the eos_token variable, and no Phi-3 "<|end|>";
//   - llama2: both "[INST]" and "<<SYS>>".
//
// An empty or all-white-space tmpl (a model without a template) yields the
// plain template. Anything else yields an *UnknownTemplateError matching
// ErrUnknownTemplate; the caller may then choose a family with Named.
func Detect(tmpl string) (Template, error) {
	has := func(s string) bool { return strings.Contains(tmpl, s) }
	switch {
	case strings.TrimSpace(tmpl) == "":
		return Template{f: familyPlain}, nil
	case has("<|start_header_id|>") && has("<|eot_id|>"):
		return Template{f: familyLlama3}, nil
	case has("<|im_start|>"):
		return Template{f: familyChatML}, nil
	case has("<|user|>") && has("<|assistant|>") && (has("</s>") || has("eos_token")) && !has("<|end|>"):
		return Template{f: familyZephyr}, nil
	case has("[INST]") && has("<<SYS>>"):
		return Template{f: familyLlama2}, nil
	}
	return Template{}, &UnknownTemplateError{Excerpt: excerpt(tmpl)}
}

// excerpt returns the start of s with runs of white space collapsed to one
// space, cut to excerptRunes runes with "…" marking the cut.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= excerptRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == excerptRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

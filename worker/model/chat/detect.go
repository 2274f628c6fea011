package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// excerptRunes bounds the template excerpt quoted in an UnknownTemplateError.
const excerptRunes = 60

// Detect returns the template family whose markers appear in tmpl, the Jinja
// source from a GGUF file's tokenizer.chat_template. The checks, in order:
//
//   - llama3.1: "<|start_header_id|>", "<|eot_id|>" and the "Cutting
//     Knowledge Date" header of Llama 3.1–3.3; llama3: the first two
//     without it;
//   - qwen3: "<|im_start|>" and the "enable_thinking" switch; qwen2.5:
//     "<|im_start|>" and Qwen's default system prompt ("You are Qwen, created
//     by Alibaba Cloud"); chatml: "<|im_start|>" otherwise, unless the
//     template has "<think>" (a reasoning template whose rules are not
//     known: refused);
//   - gemma: "<start_of_turn>" and "<end_of_turn>";
//   - phi3: "<|user|>", "<|assistant|>" and "<|end|>";
//   - zephyr: "<|user|>" and "<|assistant|>", the end marker written as "</s>"
//     or as the eos_token variable;
//   - llama2: both "[INST]" and "<<SYS>>";
//   - mistral-nemo: "[INST]" written with no space before the content
//     ("[INST]" + …), as Mistral Nemo does; the Mistral templates that put
//     a space there are refused.
//
// An empty or all-white-space tmpl (a model without a template) yields the
// plain template. Anything else yields an *UnknownTemplateError matching
// ErrUnknownTemplate, naming the template's start and hash; Detect never
// falls back to a family silently. The caller may then choose a family with
// Named.
func Detect(tmpl string) (Template, error) {
	has := func(s string) bool { return strings.Contains(tmpl, s) }
	unknown := func(reason string) (Template, error) {
		sum := sha256.Sum256([]byte(tmpl))
		return Template{}, &UnknownTemplateError{Excerpt: excerpt(tmpl), Hash: hex.EncodeToString(sum[:8]), Reason: reason}
	}
	switch {
	case strings.TrimSpace(tmpl) == "":
		return Template{f: familyPlain}, nil
	case has("<|start_header_id|>") && has("<|eot_id|>"):
		if has("Cutting Knowledge Date") {
			return Template{f: familyLlama31}, nil
		}
		return Template{f: familyLlama3}, nil
	case has("<|im_start|>"):
		switch {
		case has("enable_thinking"):
			return Template{f: familyQwen3}, nil
		case has("You are Qwen, created by Alibaba Cloud"):
			return Template{f: familyQwen25}, nil
		case has("<think>"):
			return unknown("a ChatML template with reasoning rules other than Qwen3's")
		}
		return Template{f: familyChatML}, nil
	case has("<start_of_turn>") && has("<end_of_turn>"):
		return Template{f: familyGemma}, nil
	case has("<|user|>") && has("<|assistant|>") && has("<|end|>"):
		return Template{f: familyPhi3}, nil
	case has("<|user|>") && has("<|assistant|>") && (has("</s>") || has("eos_token")):
		return Template{f: familyZephyr}, nil
	case has("[INST]") && has("<<SYS>>"):
		return Template{f: familyLlama2}, nil
	case has(`"[INST]" +`) || has(`'[INST]' +`) || has(`"[INST]"+`) || has(`'[INST]'+`):
		return Template{f: familyMistralNemo}, nil
	case has("[INST]"):
		return unknown("a Mistral template whose spacing is not Mistral Nemo's")
	}
	return unknown("")
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

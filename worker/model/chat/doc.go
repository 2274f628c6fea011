// Package chat turns a conversation into the prompt text a chat model was
// trained on.
//
// A GGUF file stores its chat format as a Jinja program in the metadata key
// tokenizer.chat_template. zerolayer does not run Jinja. Detect instead looks
// for the markers of the common families and returns a Template that renders
// that family in Go, byte for byte as the reference Jinja template would
// (checked against the published templates of the models named here):
//
//	llama2        [INST] and <<SYS>>                        Llama 2 chat, CodeLlama instruct
//	llama3        <|start_header_id|> and <|eot_id|>        Llama 3.0 instruct
//	llama3.1      as llama3, plus "Cutting Knowledge Date"  Llama 3.1–3.3 (date header, tools)
//	qwen3         <|im_start|> and enable_thinking          Qwen3 (thinking switch, reasoning, tools)
//	qwen2.5       <|im_start|> and Qwen's default system    Qwen2.5 instruct (tools)
//	chatml        <|im_start|>                              SmolLM, many fine-tunes
//	gemma         <start_of_turn> and <end_of_turn>         Gemma 2 and 3
//	phi3          <|user|>, <|assistant|> and <|end|>       Phi-3, Phi-3.5
//	mistral-nemo  "[INST]" + content, no spaces             Mistral Nemo (tools)
//	zephyr        <|user|>, <|assistant|> and </s>          Zephyr, TinyLlama chat
//	plain         (empty template)                          base models without a template
//
// A non-empty template that matches none of them is refused with
// ErrUnknownTemplate, whose message quotes the template's first sixty
// characters and a hash of it, rather than guessed at; the caller can pick a
// family by name with Named (the --chat-template override).
//
// Data flows in one direction: metadata string → Detect → Template; then
// system prompt, messages and RenderOptions → Template.RenderWith → prompt
// text → tokenizer. Template.AddsBOS says whether the text already starts
// with the model's BOS marker, so that the caller does not add a second one
// when tokenizing, and Template.StopStrings lists the texts that end a turn,
// for the sampler's stop matcher.
//
// Family rules worth knowing:
//   - gemma has no system role: the system text is folded into the first
//     user turn followed by a blank line, as Gemma 3's template does (Gemma
//     2's refuses it); the assistant's role is written "model"; user and
//     model turns must alternate.
//   - qwen3 has the thinking switch RenderOptions.EnableThinking: false ends
//     the generation prompt with the empty "<think>\n\n</think>\n\n" block.
//     Assistant turns after the last user query keep their reasoning
//     (Message.Reasoning, or a "<think>…</think>" block in the content) and
//     earlier ones lose it, as the template does. SplitReasoning separates a
//     generated reply into reasoning and answer.
//   - Tool definitions (RenderOptions.Tools), assistant tool calls and tool
//     results are rendered by llama3.1 (in the first user message, as JSON
//     indented by four), qwen2.5 and qwen3 (a <tools> block in the system
//     turn, <tool_call> and <tool_response> blocks) and mistral-nemo
//     ([AVAILABLE_TOOLS] before the last user message). The other families
//     refuse them with ErrToolsUnsupported.
//   - llama3.1 writes "Today Date:" with RenderOptions.Today, or the
//     template's fallback 26 Jul 2024.
//   - mistral-nemo puts the system prompt in front of the last user message,
//     and only when that message ends the conversation, as its template does.
//
// Known limits: the special-token texts (BOS, EOS) are those of each
// family's models, not read from the vocabulary. Templates that contain
// [INST] with other spacing (Mistral 7B v0.1–v0.3) and ChatML templates with
// "<think>" but no enable_thinking (QwQ, other reasoning fine-tunes) are not
// recognised. The llama3.1 built-in tools (brave_search, wolfram_alpha) and
// tools in the system message are not rendered.
//
//	tmpl, err := chat.Detect(meta["tokenizer.chat_template"])
//	if err != nil {
//		return err
//	}
//	off := false
//	prompt, err := tmpl.RenderWith("You are terse.", []chat.Message{
//		{Role: chat.RoleUser, Content: "Hi!"},
//	}, chat.RenderOptions{AddGenerationPrompt: true, EnableThinking: &off})
//	// … generate reply …
//	reasoning, answer := chat.SplitReasoning(reply)
//
// It imports nothing of ours.
package chat

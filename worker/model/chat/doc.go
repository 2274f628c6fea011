// Package chat turns a conversation into the prompt text a chat model was
// trained on.
//
// A GGUF file stores its chat format as a Jinja program in the metadata key
// tokenizer.chat_template. zerolayer does not run Jinja. Detect instead looks
// for the markers of a few common families and returns a Template that
// renders that family in Go, byte for byte as the reference Jinja template
// would:
//
//	llama2  [INST] and <<SYS>>                         Llama 2 chat, CodeLlama instruct
//	llama3  <|start_header_id|> and <|eot_id|>         Llama 3 instruct
//	chatml  <|im_start|>                               Qwen, SmolLM, many fine-tunes
//	zephyr  <|user|>, <|assistant|> and </s>           Zephyr, TinyLlama chat
//	plain   (empty template)                           base models without a template
//
// A non-empty template that matches none of them is refused with
// ErrUnknownTemplate rather than guessed at; the caller can pick a family by
// name with Named (the --chat-template override).
//
// Data flows in one direction: metadata string → Detect → Template; then
// system prompt and messages → Template.Render → prompt text → tokenizer.
// Template.AddsBOS says whether the text already starts with the model's BOS
// marker, so that the caller does not add a second one when tokenizing, and
// Template.StopStrings lists the texts that end a turn, for the sampler's stop
// matcher.
//
// Known limits: the Llama 3.1+ templates prepend a "Cutting Knowledge Date"
// header to the system turn and support tool calls; the llama3 rendering here
// is the Llama 3.0 one and has neither. The Qwen ChatML templates insert a
// default system prompt when none is given; chatml here does not. Templates
// that contain [INST] without <<SYS>> (Mistral) are not recognised, because
// their spacing differs from Llama 2.
//
//	tmpl, err := chat.Detect(meta["tokenizer.chat_template"])
//	if err != nil {
//		return err
//	}
//	prompt, err := tmpl.Render("You are terse.", []chat.Message{
//		{Role: chat.RoleUser, Content: "Hi!"},
//	}, true)
//
// It imports nothing of ours.
package chat

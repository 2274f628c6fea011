// Package engine turns prompts into generated tokens on a loaded model.
//
// Load opens a GGUF file and builds the model with its prompt.Prompter
// (tokenizer and chat template); Loaded.Prompt turns text (raw, or
// rendered through the chat template) into prompt ids. An Engine owns a paged KV arena and runs
// Requests: GenerateBatch prefills every prompt in one forward step, then
// decodes one token per live sequence per step, sampling each with its own
// seeded Sampler, streaming text through a UTF-8-safe decoder and a stop
// sequence matcher, and finishing a sequence at an end-of-generation token,
// a stop sequence, MaxTokens or the end of the context. Each Result carries
// its usage: token counts, time to first token and mean time per token.
//
// Endings are honest. A budget stop (MaxTokens, the context, a memory cap)
// that comes before an inline constraint is satisfied keeps its stop
// reason and marks the Result Incomplete, with the reason, instead of
// failing the tool; a character the budget cut in two is left out of the
// text (the decoder already held it back from the stream), so Text is
// always valid UTF-8 while OutputIDs keep every token. Holding back was
// chosen over refusing, near the end, tokens that start a character the
// budget cannot finish: it does not change what the model samples, needs
// no estimate of how many tokens a character still takes (byte-level and
// byte-fallback vocabularies differ), and works with or without a mask.
// When the tools ask for a retry, the output is discarded but its tokens
// and time stay in the usage (Usage.RetriedOutputTokens), and the retry
// bans the token with which the failed attempt began its marker while it
// follows that attempt, so a greedy retry does not repeat it.
//
// The Engine is the simple in-order executor; the scheduler (continuous
// batching, admission, preemption) drives the same model and KV arena step
// by step. The KV arena defaults of both, and of everything else that
// sizes an arena without being told, are in kvsize.go: DefaultKVContexts
// full contexts for an Engine; for a scheduler on the CPU DefaultKVArena,
// from the model's context and the machine's memory (4 full contexts,
// more on a large machine, capped by a small one, at least
// DefaultKVMemoryMB); blocks of gpu.DefaultBlockTokens positions.
//
//	l, _ := engine.Load("stories260K.gguf", cpu.New(cpu.Config{}))
//	ids, _ := l.Prompt("Once upon a time", prompt.Options{})
//	e, _ := engine.New(l.Model, l.Tokenizer, engine.Config{})
//	res, _ := e.Generate(ctx, engine.Request{PromptIDs: ids, MaxTokens: 64})
//
// It imports the model packages (forward pass, gguf, prompt, tokenizer), the
// sampler, the tools and the gpu seam; never a concrete backend (the caller
// hands one in), NATS, the worker or the producer.
package engine

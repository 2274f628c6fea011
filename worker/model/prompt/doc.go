// Package prompt turns text and conversations into a model's prompt tokens
// without loading its weights: it reads a GGUF file's metadata for the
// tokenizer (package tokenizer) and the chat template (package chat).
//
// Both sides of the queue use it: producers count a job's prompt tokens to
// pick its prompt-length bucket, and the worker's engine tokenizes the same
// way before it runs the job, so the two always agree.
//
// It may import contracts, gguf, tokenizer and chat — never the forward
// pass (package model), a gpu backend, the engine, the scheduler, the
// sampler or the tools: a backend service that imports the Go client must
// not compile an inference engine (producer's TestNoModelRunner keeps it so).
//
//	p, _ := prompt.Open("stories260K.gguf")
//	defer p.Close()
//	ids, _ := p.Prompt("Once upon a time", prompt.Options{})
package prompt

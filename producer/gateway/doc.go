// Package gateway is the HTTP face of the queue: a jobs API (submit, fetch
// the result, follow the events as server-sent events, cancel), a batches
// API (a JSONL file of requests in, run by producer.RunBatch, a JSONL file
// of results out, kept in a JetStream object store), and two
// compatible synchronous APIs, OpenAI's chat completions and Anthropic's
// Messages, each of which submits a job and answers with its output
// (streamed as SSE when asked). Their tool calls (function calling, tool
// use) are made with constrained decoding (toolcalls.go).
//
// Tenants come from API keys ("Authorization: Bearer KEY" or "x-api-key:
// KEY"), never from a request body. Errors carry the contract's stable
// codes and HTTP statuses (contracts/errors.md).
//
// A key is "zl_<id>_<secret>" (keys.go): a public id and 256 random bits.
// A Keyring holds keys as their SHA-256 only, read from a key file of
// "ID TENANT sha256:HASH CREATED" lines that it rereads when the file
// changes, so a revoked key is refused from the next request on:
//
//	key, e, _ := gateway.NewKey("acme", time.Now()) // hand key out once
//	_ = gateway.AppendKeyFile("keys", e)            // store its hash
//	keys, _ := gateway.NewKeyring(gateway.KeyringConfig{File: "keys"})
//	gw, _ := gateway.New(nc, gateway.Config{Keys: keys})
//	// later: gateway.RevokeKeyFile("keys", e.ID)
//
// The gateway's logs name a refused key by its id and never hold a key, a
// secret or a prompt (TestGatewayLogsNoSecrets).
//
// OpenAI's Files and Batches APIs (openai_files.go, openai_batches.go) run
// on the native batches: an uploaded file of chat completions and
// embeddings requests (the two may mix in one file) becomes a native
// batch, resumed and billed line by line as any, whose end writes OpenAI's
// output and error files (TestOpenAIBatches, TestOpenAIBatchEmbeddings).
//
// OpenAI's embeddings API (embeddings.go, POST /v1/embeddings) maps a
// request's inputs (a string, strings, token ids, lists of token ids) to
// one embedding job (contracts.EmbeddingRequest) and answers its vectors
// as floats or base64 (little-endian float32), with the usage of the
// inputs' tokens. Its errors name the request's own field in param
// (input[2], not the job's embedding.input[2]).
//
// Batch files are read whole or not at all (objects.go): the object
// store's reader gives up on a stalled read, and what it gave until then
// is only part of the file. A read that fails part-way is read again from
// the start, skipping what was delivered, and every byte is checked
// against the object's size and SHA-256 before the last one goes out. A
// download (a file's content, a batch's output or results) carries
// Content-Length and Repr-Digest (RFC 9530); one whose read fails after
// its first byte is aborted, so that the client's read of the body fails
// (TestDownloadStalled), never ending short as if whole.
//
// A synchronous call whose client goes away cancels its job; a job
// submitted through /v1/jobs runs whatever the client does, and its events
// can be followed again from the start or from Last-Event-ID.
//
// With Config.Quota (a *quota.Checker from contracts/quota) a job over its
// tenant's limits (requests or tokens per minute, jobs in flight, monthly
// spend, as billing publishes them in ZL_LIMITS) is answered 429 with
// Retry-After and the code rate_limited, concurrency_limited or
// spend_limit_exceeded before anything is published.
//
// Anthropic's Message Batches API (/v1/messages/batches, with create, get,
// list, cancel, delete and results; anthropic_batches.go) runs on the
// native batches: every request is checked and mapped to a job when the
// batch is created (one bad request refuses the batch, naming it), the run
// is the native run (taken over by another gateway when theirs dies, billed per line),
// and the results are mapped from the native output. A batch that has not
// ended 24 hours after it was created (Config.AnthropicBatchExpiry)
// expires: its unfinished requests are canceled and reported expired.
//
// It imports contracts and producer, and never the worker or anything that
// runs a model (producer's TestNoModelRunner).
package gateway

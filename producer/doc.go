// Package producer is the Go client of zerolayer: backend services use it
// to submit generation jobs, follow their events, wait for results and
// cancel them.
//
// Submit validates the request, assigns a job id when the caller gave none
// (the id is the idempotency key: a resubmission within the duplicate
// window is stored once and runs once), counts the prompt tokens with the
// model's own tokenizer and chat template (read from the GGUF metadata; the
// weights are never loaded) to choose the prompt-length bucket, checks that
// a worker will run its model (CheckModel: while the fleet's workers are
// live and none serves the model, nor did one lately, the job is refused
// with unknown_model unless it asks to wait_for_model), and publishes the
// job on zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>. The tenant
// comes from the client's configuration, which mirrors its NATS
// credentials, never from the request body.
//
//	c, _ := producer.New(nc, producer.Config{Tenant: "acme", Models: map[string]string{"stories260k": path}})
//	id, _ := c.Submit(ctx, &contracts.JobRequest{Model: "stories260k", Messages: msgs}, nil)
//	events, wait, _ := c.Events(ctx, id) // replays from the first event
//	for ev := range events { fmt.Print(ev.Text) }
//	res, _ := c.Wait(ctx, id)
//
// Embed submits an embedding job (contracts.EmbeddingRequest) and waits
// for its vectors, one per input:
//
//	e, _ := c.Embed(ctx, "stories260k", producer.TextInputs("a cat", "a dog"), nil)
//	// e.Vectors[0], e.Vectors[1], e.Usage.InputTokens
//
// Follow hands the same events to a callback on the caller's goroutine,
// for a server that relays them (the gateway's SSE answers). A streaming
// job's delta events each carry the tokens of a short interval (the
// worker's Config.DeltaInterval), its first token alone and at once.
//
// # Failures: what the client retries and what it leaves to the caller
//
// The client rides out what passes by itself, and reports the rest with a
// stable code (contracts.Error; errors.Is(err, contracts.CodeUnavailable)
// and the like):
//
//   - Submit does not retry. While the connection is down, or when
//     JetStream's acknowledgement does not come within 10 s, it returns
//     CodeUnavailable; a full queue is CodeOverloaded. Both are retryable
//     (Retryable()), and submitting the same request with the same id
//     again is safe: the job is stored and run once. A request the
//     contract refuses (bad input, a model not served when Config.ServedOnly
//     names the served ones) is refused for good.
//   - Wait retries by itself: across server restarts, stream leader
//     changes and its own reconnects it keeps waiting, looking the result
//     up again every 2 s. It returns the result, ctx's error, an error of
//     a connection closed for good, or CodeNotFound for a job that has no
//     result and is not queued at two looks 2 s apart (never submitted, or
//     expired). A job that ended badly is a result (Status failed or
//     canceled, with its Error), not an error of Wait.
//   - Result does not wait or retry: the result, ErrPending (queued or
//     running), CodeNotFound (never submitted, or expired) or, while NATS
//     is out of reach, CodeUnavailable.
//   - Events follows a job across reconnects (an ordered consumer resumes
//     where it was); done returns the error that stopped it.
//   - RunBatch retries everything passing (submits, look-ups, waits), and
//     submits a line again when its job is found unknown; a line is marked
//     failed only when its job failed or the contract refused it.
//
// It imports contracts and worker/model/prompt (tokenizer and chat template,
// read from GGUF metadata without the weights), and never the engine,
// scheduler, tools, sampler, forward pass or a gpu backend: a backend
// service that imports the client must not compile an inference engine
// (TestNoModelRunner).
package producer

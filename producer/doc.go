// Package producer is the Go client of zerolayer: backend services use it
// to submit generation jobs, follow their events, wait for results and
// cancel them.
//
// Submit validates the request, assigns a job id when the caller gave none
// (the id is the idempotency key: a resubmission within the duplicate
// window is stored once and runs once), counts the prompt tokens with the
// model's own tokenizer and chat template (read from the GGUF metadata; the
// weights are never loaded) to choose the prompt-length bucket, and
// publishes the job on zl.jobs.<priority>.<bucket>.<tenant>. The tenant
// comes from the client's configuration, which mirrors its NATS
// credentials, never from the request body.
//
//	c, _ := producer.New(nc, producer.Config{Tenant: "acme", Models: map[string]string{"stories260k": path}})
//	id, _ := c.Submit(ctx, &contracts.JobRequest{Model: "stories260k", Messages: msgs}, nil)
//	events, wait, _ := c.Events(ctx, id) // replays from the first event
//	for ev := range events { fmt.Print(ev.Text) }
//	res, _ := c.Wait(ctx, id)
//
// It imports contracts and worker/model/prompt (tokenizer and chat template,
// read from GGUF metadata without the weights), and never the engine,
// scheduler, tools, sampler, forward pass or a gpu backend: a backend
// service that imports the client must not compile an inference engine
// (TestNoModelRunner).
package producer

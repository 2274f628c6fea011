// Package contracts is the wire contract of zerolayer: the messages that
// travel over NATS JetStream, the subjects and streams that carry them, the
// headers, the error codes and the validation of untrusted requests. It is a
// leaf package: it imports nothing else of zerolayer, so the producer, the
// worker and billing can all depend on it without cycles. Non-Go clients
// find the same messages as JSON Schemas (draft 2020-12) in schema/, and
// examples of each in testdata/.
//
// # Data flow
//
// A producer (Go client, HTTP gateway, or plain NATS) decodes and checks a
// [JobRequest] with [DecodeJobRequest], picks a [Bucket] from the prompt's
// token count with [Buckets.Bucket], and publishes the body on
// [JobSubject] (zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>,
// stream ZL_JOBS; <model> is [ModelToken] of the request's model) with the
// headers of [NewHeader]: Zl-Tenant, Zl-Contract and traceparent. Job ids
// are unique per tenant, and every subject that names a job names its
// tenant: ZL_JOBS holds one message per subject, so a job resubmitted
// while queued is refused ([IsDuplicateJob]), and a tenant's NATS account
// can reach only its own tenant's subjects.
//
// A job is a generation, or with [JobRequest.Embedding] an embedding job
// ([EmbeddingRequest]: strings or token arrays, several per job, and
// dimensions): it travels, is scheduled and is billed like a generation,
// its bucket chosen by its inputs' tokens; its [Result] carries one
// vector per input in Embeddings and no stop_reason (nor does its final
// event), and its [Usage] is of kind embedding, every input token counted
// as input.
//
// Workers pull only the jobs of the models they serve: through a durable
// pull consumer per priority, bucket, tenant and model
// ([ModelConsumerName], filter [ModelJobsFilter]), made on demand. Jobs
// queued by earlier releases stay readable: ZL_JOBS binds the model-less
// form too ([ModellessJobSubject], pulled through a consumer per class and
// tenant, [TenantConsumerName]; a worker that pulls one for a model it
// does not serve republishes it on [JobSubject]), and the oldest form
// (no job id) is pulled through the nine class consumers ([ConsumerName],
// filter [JobsFilter]).
//
// Workers announce themselves in the [WorkersBucket] key-value bucket
// ([WorkerInfo]: id, models with context and KV arena sizes, start time),
// rewritten every [WorkerHeartbeat] and gone after [WorkersTTL], and their
// models in [ModelsBucket] ([ModelRecord], kept [ModelsTTL]). Producers
// follow both (package contracts/fleet): while workers are live and none
// serves a job's model nor served it lately, the job is refused at submit
// with [CodeUnknownModel], unless it asks to wait
// ([JobRequest.WaitForModel]); with no worker live it is queued and waits.
//
// A worker publishes [Event]s on
// [EventsSubject] (started, delta, tool, preempted, resumed, then final or
// error), the [Result] on [ResultsSubject], the [Usage] record on
// [UsageSubject], and only then acks the job. A retryable failure is
// Nak'ed with a delay; a permanent one is terminated and recorded as a
// [DLQRecord] on [DLQSubject]. A job redelivered after a crash runs again
// with a higher attempt and its event seq back at 1.
//
// Cancelation is a message on [CancelSubject], stored in ZL_CANCEL (looked
// up before a job runs) and heard by the worker running the job. Results,
// the last event and cancel requests are read with [LastMsg] (JetStream's
// direct get), which a tenant's account may use on its own subjects only.
// [EnsureStreams] creates or updates all streams, consumers and buckets,
// idempotently. ZL_JOBS binds only
// [JobsSubjects] (a job on an unknown priority or bucket gets no ack), and
// [CheckServer] refuses a server older than [MinServerVersion].
//
// Per-tenant limits (requests and tokens per minute, jobs in flight, a
// monthly spend limit) travel as [TenantLimits] in the
// [TenantLimitsBucket] key-value bucket, written by billing and decoded
// with [DecodeTenantLimits] by whoever admits jobs (package
// contracts/quota). A job over a limit is refused with
// [CodeRateLimited], [CodeConcurrencyLimited] or [CodeSpendLimitExceeded]
// and [Error.RetryAfterMs].
//
// # Decoding rules
//
// JSON field names are snake_case. Unknown fields are rejected at any depth
// unless [Limits.AllowUnknownFields] is set: a misspelt parameter must not
// be silently ignored and billed. JSON null means unset. Unset optional
// sampling fields are nil pointers, distinct from an explicit zero. Every
// problem is reported, each with its JSON path, in a [*ValidationError]
// whose entries are [*Error]s.
//
// Every untrusted message goes through the same strict decoder: job
// requests ([DecodeJobRequest]) and usage records ([DecodeUsage], which
// billing uses) are checked for size, UTF-8, one JSON object, and each
// field's JSON type against the Go type before they are decoded. A usage
// record must carry every field without omitempty and may carry fields it
// does not know (a newer worker's record is still billed).
//
// # Errors
//
// Every failure a client can see has a stable [Code] from one table,
// [Codes], with an HTTP status, whether it is retryable, and a one-line
// description; errors.md lists the table and is generated from it (go test
// -run TestErrorsDoc -update). Match codes with errors.Is:
//
//	if errors.Is(err, contracts.CodeUnknownTool) { ... }
//
// and turn any error into its wire form with [ErrorFrom].
//
// # Example
//
//	req, err := contracts.DecodeJobRequest(body, contracts.Limits{})
//	if err != nil {
//		e := contracts.ErrorFrom(err) // code, message, field
//		http.Error(w, e.Error(), e.HTTPStatus())
//		return
//	}
//	if req.ID == "" {
//		req.ID = newJobID() // any 1-128 characters of [A-Za-z0-9_-]
//	}
//	data, _ := json.Marshal(req) // with the id and defaults filled in
//	bucket := contracts.DefaultBuckets().Bucket(promptTokens)
//	subj := contracts.JobSubject(req.Priority, bucket, tenant)
//	msg := &nats.Msg{Subject: subj, Data: data,
//		Header: contracts.NewHeader(req.ID, tenant, contracts.NewTraceparent())}
//	ack, err := js.PublishMsg(ctx, msg)
//	// ack.Duplicate is true when the id was already submitted.
//
// The natstest subpackage starts an embedded JetStream server for tests.
package contracts

package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Prefix affinity. A conversation's next turn starts with the turns before
// it: a prompt prefix that the worker which ran the earlier turn may still
// hold in its prefix cache, and that grows with every turn. Workers record
// which conversations they computed in
// [PrefixesBucket] (key: [PrefixKey] of the text, value: the worker id);
// a worker that pulls a job whose prompt starts with a prefix another live
// worker holds passes it on to that worker's own queue
// (DirectJobSubject; a consumer per worker and model), from which the
// holder pulls first. The holder's
// queue is not a pin: jobs waiting in it longer than a short bound (and
// every job of a worker that is gone) are pulled by any worker serving
// the model.
//
// The keys are hashes of text, not of tokens, so that any worker (or
// tool) computes them from a request without its model's tokenizer.
//
// A batch's shared instruction (a system prompt alone) is not routed: every
// worker that runs one of its documents computes it once and holds it, so
// the batch runs on the whole fleet (passing its documents to the first
// worker that computed the instruction would pile the batch on it while
// the others idle).

// PrefixesBucket is the key-value bucket of held prefixes: key a
// [PrefixKey], value the id of the worker that computed it last. An entry
// lives PrefixTTL after its last write.
const PrefixesBucket = "ZL_PREFIXES"

// PrefixTTL is how long a worker's claim to hold a prefix lasts without
// being written again. A prefix cache keeps blocks while memory allows; a
// claim older than this is likely evicted.
const PrefixTTL = 10 * time.Minute

// PrefixesBucketConfig is the configuration of [PrefixesBucket].
func (c StreamsConfig) PrefixesBucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: PrefixesBucket, Description: "zerolayer prompt prefixes and the workers holding them",
		TTL: PrefixTTL, History: 1, Storage: c.Storage, Replicas: c.Replicas}
}

// SubjectDirectJobsPrefix starts
// zl.jobs.direct.<worker>.<priority>.<bucket>.<tenant>.<model>.<job_id>:
// a job passed on to the worker that holds its prompt's prefix.
const SubjectDirectJobsPrefix = SubjectJobsPrefix + "direct."

// DirectJobsSubjects is the subject ZL_JOBS binds for jobs passed on to a
// worker: zl.jobs.direct.<worker>.<priority>.<bucket>.<tenant>.<model>.<job_id>.
// "direct" is not a priority, so it overlaps no class's subjects.
const DirectJobsSubjects = SubjectDirectJobsPrefix + "*.*.*.*.*.*"

// DirectJobSubject returns the subject of a job passed on to the worker
// of token worker (ModelToken of its id); the rest is the job's own
// subject's tokens.
func DirectJobSubject(worker string, p Priority, b Bucket, tenant, model, jobID string) string {
	return SubjectDirectJobsPrefix + worker + "." + string(p) + "." + string(b) + "." + tenant + "." + ModelToken(model) + "." + jobID
}

// DirectJobsFilter returns zl.jobs.direct.<worker>.*.*.*.<model>.*, the
// filter of worker's queue of model's jobs (tokens: ModelToken).
func DirectJobsFilter(worker, model string) string {
	return SubjectDirectJobsPrefix + ModelToken(worker) + ".*.*.*." + ModelToken(model) + ".*"
}

// DirectConsumerName returns the durable name of worker's queue of model's
// jobs: direct~<worker token>~<model token>.
func DirectConsumerName(worker, model string) string {
	return DirectConsumerPrefix + ModelToken(worker) + "~" + ModelToken(model)
}

// DirectConsumerPrefix starts every worker queue's durable name.
const DirectConsumerPrefix = "direct~"

// DirectConsumerConfig returns the durable pull consumer of worker's queue
// of model's jobs (one per model, so that a worker taking jobs from
// another's queue takes only those of models it serves), with the class
// consumers' ack wait, deliveries and back-off. The worker pulls from it
// first; any worker serving the model may pull from another's (a job
// waiting there too long, or a worker gone). It is removed after
// TenantConsumerInactive without pulls. c must already have its defaults.
func (c StreamsConfig) DirectConsumerConfig(worker, model string) jetstream.ConsumerConfig {
	cc := c.ConsumerConfig(PriorityNormal, BucketShort)
	cc.Durable = DirectConsumerName(worker, model)
	cc.Description = "zerolayer jobs for " + model + " passed on to worker " + worker + ", which holds their prompt's prefix"
	cc.FilterSubject = DirectJobsFilter(worker, model)
	cc.InactiveThreshold = TenantConsumerInactive
	return cc
}

// HeaderEnqueuedAt carries, on a job passed on to another worker's queue,
// when the job was first stored (RFC 3339, nanoseconds): its queue time
// counts from then.
const HeaderEnqueuedAt = "Zl-Enqueued-At"

// PrefixKey is the key in [PrefixesBucket] of a prompt that starts with
// system and messages, for model: hex of SHA-256 over the model, the
// system prompt and each message's role and text, each ended by a zero
// byte (none of them holds one: JSON text can, but a prompt with one
// only misses the cache). 32 hex digits.
func PrefixKey(model, system string, messages []Message) string {
	h := sha256.New()
	w := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	w(model)
	w(system)
	for _, m := range messages {
		w(string(m.Role))
		w(m.Content)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ConversationKey is the key of the prefix a worker may hold for r: the
// conversation before its last message (the earlier turns, a reply
// included); "" for an embedding job or a prompt of one message.
func ConversationKey(r *JobRequest) string {
	if r.Embedding != nil || len(r.Messages) < 2 {
		return ""
	}
	return PrefixKey(r.Model, r.System, r.Messages[:len(r.Messages)-1])
}

// HeldConversationKey is the key of the prefix a worker holds once it has
// run r and answered reply: the conversation with the reply as its last
// turn, what the next turn starts with (its ConversationKey); "" for an
// embedding job.
func HeldConversationKey(r *JobRequest, reply string) string {
	if r.Embedding != nil {
		return ""
	}
	return PrefixKey(r.Model, r.System, append(append([]Message(nil), r.Messages...), Message{Role: RoleAssistant, Content: reply}))
}

// ValidWorkerToken reports whether s is a well-formed worker token
// (ModelToken of a worker id), as ZL_PREFIXES's values must be.
func ValidWorkerToken(s string) bool { return modelTokenProblem(s) == "" }

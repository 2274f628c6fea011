package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxModelTokenLen is the longest model token (ModelToken): a subject
// token, a consumer name part and a key-value key.
const MaxModelTokenLen = 64

// modelTokenHashLen is how many hex digits of the name's SHA-256 end a
// token cut to MaxModelTokenLen, after "__".
const modelTokenHashLen = 16

// ModelToken returns the subject-safe token of a model name, the <model>
// of zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>, of the model
// consumers' names and of the ZL_MODELS keys. ASCII letters, digits and
// '-' are kept (so "stories260k" and "qwen3-s-f32" are their own tokens);
// every other byte, '_' included, becomes "_XX", its value in upper-case
// hex ("qwen3-0.6b" is "qwen3-0_2E6b"). A token that would be longer than
// MaxModelTokenLen is cut and ends with "__" and 16 hex digits of the
// name's SHA-256 (an uncut token never holds "__"). Distinct names give
// distinct tokens (cut ones, but for a hash collision); the empty name
// gives "_" (a model-less request is refused by validation before it is
// routed). Names are case-sensitive, as the workers serve them.
func ModelToken(name string) string {
	if name == "" {
		return "_"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02X", c)
	}
	tok := b.String()
	if len(tok) <= MaxModelTokenLen {
		return tok
	}
	sum := sha256.Sum256([]byte(name))
	return tok[:MaxModelTokenLen-2-modelTokenHashLen] + "__" + hex.EncodeToString(sum[:])[:modelTokenHashLen]
}

// modelTokenProblem says what keeps s from being a model token (of any
// name: its bytes and length only), or returns "".
func modelTokenProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxModelTokenLen:
		return fmt.Sprintf("is %d characters long, above the limit of %d", len(s), MaxModelTokenLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Sprintf("holds %q: a model token has letters, digits, '-' and '_' only", c)
		}
	}
	return ""
}

// The fleet's key-value buckets: workers announce what they serve, so that
// producers and the gateway know which models the live fleet serves
// (package contracts/fleet reads them).
const (
	// WorkersBucket holds one key per live worker (ModelToken of its id),
	// a [WorkerInfo] as JSON, rewritten by the worker every
	// WorkerHeartbeat; an entry older than WorkersTTL is a worker gone
	// (the bucket's MaxAge removes it too, and a worker that stops
	// deletes its own).
	WorkersBucket = "ZL_WORKERS"
	// ModelsBucket holds one key per model served lately (ModelToken of
	// its name), a [ModelRecord] as JSON, rewritten with each heartbeat of
	// a worker serving it and kept ModelsTTL after the last: a short
	// outage of a model's workers does not make the model unknown.
	ModelsBucket = "ZL_MODELS"
)

// Fleet timings.
const (
	// WorkerHeartbeat is how often a worker rewrites its WorkersBucket
	// entry (worker.Config.HeartbeatInterval's default).
	WorkerHeartbeat = 5 * time.Second
	// WorkersTTL is how long a worker's entry stands without a heartbeat:
	// the WorkersBucket's MaxAge, and the age past which readers count the
	// worker gone.
	WorkersTTL = 20 * time.Second
	// ModelsTTL is how long a model stays known after the last heartbeat
	// of a worker serving it: the ModelsBucket's MaxAge.
	ModelsTTL = 6 * time.Hour
)

// MaxWorkerInfoBytes is the largest WorkerInfo or ModelRecord
// DecodeWorkerInfo and DecodeModelRecord accept.
const MaxWorkerInfoBytes = 64 << 10

// WorkerInfo is a worker's announcement in [WorkersBucket]: who it is and
// what it serves.
type WorkerInfo struct {
	// WorkerID is the worker's id (worker.Config.ID), as in usage
	// records.
	WorkerID string `json:"worker_id"`
	// Models are the models the worker pulls jobs for.
	Models []WorkerModel `json:"models"`
	// Device names where its jobs run ("cpu", "cuda:0 …").
	Device string `json:"device,omitempty"`
	// StartedAt is when the worker started.
	StartedAt time.Time `json:"started_at"`
	// UpdatedAt is when the worker wrote this entry (its last heartbeat).
	UpdatedAt time.Time `json:"updated_at"`
}

// WorkerModel is one model a worker serves.
type WorkerModel struct {
	// Name is the served name: the request's model.
	Name string `json:"name"`
	// ContextTokens is the model's context length in tokens; 0 when not
	// known.
	ContextTokens int `json:"context_tokens,omitempty"`
	// KVArenaMB is the size of the model's KV arena on the worker, in MB;
	// 0 when not known.
	KVArenaMB int `json:"kv_arena_mb,omitempty"`
	// EmbeddingOnly is set for a model that embeds but does not generate
	// (an encoder such as BERT): only embedding jobs run on it. Absent: it
	// does both (and in announcements of workers that predate it).
	EmbeddingOnly bool `json:"embedding_only,omitempty"`
}

// ModelNames returns the names of the models w serves.
func (w *WorkerInfo) ModelNames() []string {
	out := make([]string, len(w.Models))
	for i, m := range w.Models {
		out[i] = m.Name
	}
	return out
}

// ModelRecord is a model's entry in [ModelsBucket]: that a worker served
// it lately.
type ModelRecord struct {
	// Model is the served name.
	Model string `json:"model"`
	// WorkerID is the worker that wrote the record last.
	WorkerID string `json:"worker_id"`
	// ServedAt is when it did.
	ServedAt time.Time `json:"served_at"`
}

// DecodeWorkerInfo decodes an untrusted WorkerInfo (a ZL_WORKERS value)
// with the decoder of every wire message. Fields it does not know are
// ignored (a newer worker may add some). Every failure is a
// *ValidationError.
func DecodeWorkerInfo(b []byte) (WorkerInfo, error) {
	var w WorkerInfo
	if err := decodeMessage(b, &w, "worker info", MaxWorkerInfoBytes, shapeRules{required: true}); err != nil {
		return WorkerInfo{}, err
	}
	if w.WorkerID == "" {
		return WorkerInfo{}, &ValidationError{Problems: []*Error{fieldError(CodeInvalidRequest, "worker_id", "worker info without a worker id")}}
	}
	return w, nil
}

// DecodeModelRecord decodes an untrusted ModelRecord (a ZL_MODELS value).
func DecodeModelRecord(b []byte) (ModelRecord, error) {
	var m ModelRecord
	if err := decodeMessage(b, &m, "model record", MaxWorkerInfoBytes, shapeRules{required: true}); err != nil {
		return ModelRecord{}, err
	}
	if m.Model == "" {
		return ModelRecord{}, &ValidationError{Problems: []*Error{fieldError(CodeInvalidRequest, "model", "model record without a model")}}
	}
	return m, nil
}

// WorkersBucketConfig is the configuration of [WorkersBucket]: entries
// live WorkersTTL after their last write.
func (c StreamsConfig) WorkersBucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: WorkersBucket, Description: "zerolayer live workers and the models they serve",
		TTL: WorkersTTL, History: 1, Storage: c.Storage, Replicas: c.Replicas}
}

// ModelsBucketConfig is the configuration of [ModelsBucket]: entries live
// ModelsTTL after their last write.
func (c StreamsConfig) ModelsBucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: ModelsBucket, Description: "zerolayer models served lately",
		TTL: ModelsTTL, History: 1, Storage: c.Storage, Replicas: c.Replicas}
}

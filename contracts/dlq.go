package contracts

import (
	"encoding/json"
	"time"
)

// DLQRecord is a dead-lettered job, published on
// zl.dlq.<priority>.<bucket>.<tenant> (stream ZL_DLQ) when a job is
// terminated (a permanent failure) or has exhausted MaxDeliver. It carries
// the original request bytes, so that the job can be inspected and
// resubmitted.
type DLQRecord struct {
	// JobID is the job (the Nats-Msg-Id of the original message).
	JobID string `json:"job_id"`
	// Tenant is the job's tenant.
	Tenant string `json:"tenant"`
	// Priority is the job's class.
	Priority Priority `json:"priority"`
	// Bucket is the job's prompt-length class.
	Bucket Bucket `json:"bucket"`
	// Code is the reason the job was dead-lettered.
	Code Code `json:"code"`
	// Message explains the reason.
	Message string `json:"message"`
	// Deliveries is how many times JetStream delivered the job.
	Deliveries int `json:"deliveries"`
	// StreamSequence is the job's sequence in ZL_JOBS: a job that
	// exhausted MaxDeliver stays there until deleted by this number.
	StreamSequence uint64 `json:"stream_sequence,omitempty"`
	// Request is the original request when it is valid JSON.
	Request json.RawMessage `json:"request,omitempty"`
	// RequestBase64 is the original request, base64-encoded, when it is
	// not valid JSON.
	RequestBase64 []byte `json:"request_base64,omitempty"`
	// Time is when the job was dead-lettered (RFC 3339, UTC).
	Time time.Time `json:"time"`
}

// SetRequest stores the original request bytes: in Request when they are
// valid JSON, else in RequestBase64.
func (d *DLQRecord) SetRequest(raw []byte) {
	d.Request, d.RequestBase64 = nil, nil
	if json.Valid(raw) {
		d.Request = append(json.RawMessage(nil), raw...)
		return
	}
	d.RequestBase64 = append([]byte(nil), raw...)
}

// RequestBytes returns the original request bytes, whichever field holds
// them.
func (d *DLQRecord) RequestBytes() []byte {
	if d.Request != nil {
		return d.Request
	}
	return d.RequestBase64
}

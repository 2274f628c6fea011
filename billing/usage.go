package billing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/zerolayer/zerolayer/contracts"
)

// MaxUsageBytes is the largest usage record DecodeUsage accepts. A real one
// is well under 2 KiB.
const MaxUsageBytes = 64 << 10

// maxModelLen bounds the model name stored with a record.
const maxModelLen = 256

// usageField is one JSON field of contracts.Usage.
type usageField struct {
	name     string
	index    int
	optional bool
}

// usageFields are the JSON fields of contracts.Usage. A record must carry
// every one not marked omitempty (the contract says those are always
// present); the omitempty ones (batch_id, custom_id) are optional.
var usageFields = func() []usageField {
	var out []usageField
	t := reflect.TypeFor[contracts.Usage]()
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, usageField{name, i, opts == "omitempty"})
		}
	}
	return out
}()

// DecodeUsage decodes and validates an untrusted usage record (a ZL_USAGE
// message body). It rejects, wrapping ErrInvalidUsage: more than
// MaxUsageBytes; anything but one JSON object; a contract field that is
// missing or null; a value of the wrong type; and everything ValidateUsage
// rejects. Fields the contract does not define are ignored, so that a newer
// producer adding an optional field is still billed.
func DecodeUsage(b []byte) (contracts.Usage, error) {
	var u contracts.Usage
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidUsage, fmt.Sprintf(format, a...))
	}
	if len(b) > MaxUsageBytes {
		return u, invalid("record is %d bytes, above the limit of %d", len(b), MaxUsageBytes)
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&fields); err != nil {
		return u, invalid("not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return u, invalid("unexpected data after the JSON object")
	}
	if fields == nil {
		return u, invalid("not a JSON object: null")
	}
	var missing, wrong []string
	v := reflect.ValueOf(&u).Elem()
	for _, f := range usageFields {
		raw, ok := fields[f.name]
		if !ok || string(raw) == "null" {
			if !f.optional {
				missing = append(missing, f.name)
			}
			continue
		}
		// Field by field, so that an error names its field.
		if err := json.Unmarshal(raw, v.Field(f.index).Addr().Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				err = fmt.Errorf("a JSON %s is not a valid %s", te.Value, te.Type)
			}
			wrong = append(wrong, fmt.Sprintf("%s: %v", f.name, err))
		}
	}
	if len(missing) > 0 {
		wrong = append([]string{"missing or null: " + strings.Join(missing, ", ")}, wrong...)
	}
	if len(wrong) > 0 {
		return contracts.Usage{}, invalid("%s", strings.Join(wrong, "; "))
	}
	if err := ValidateUsage(u); err != nil {
		return contracts.Usage{}, err
	}
	return u, nil
}

// ValidateUsage checks the values of a usage record, wrapping
// ErrInvalidUsage: the job id and tenant are valid subject tokens; model
// is set; priority, bucket and status are the contract's; counts and
// timings are not negative and timings are finite; confidence is in [0, 1];
// attempt is at least 1; created_at and finished_at are set; batch_id and
// custom_id are at most 256 bytes.
func ValidateUsage(u contracts.Usage) error {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if err := contracts.ValidateJobID(u.JobID); err != nil {
		add("job_id: %v", err)
	}
	if err := contracts.ValidateTenant(u.Tenant); err != nil {
		add("tenant: %v", err)
	}
	if u.Model == "" || len(u.Model) > maxModelLen {
		add("model must be 1–%d bytes", maxModelLen)
	}
	if !u.Priority.Valid() {
		add("priority %q is not high, normal or low", u.Priority)
	}
	if !u.Bucket.Valid() {
		add("bucket %q is not short, medium or long", u.Bucket)
	}
	switch u.Status {
	case contracts.StatusCompleted, contracts.StatusFailed, contracts.StatusCanceled:
	default:
		add("status %q is not completed, failed or canceled", u.Status)
	}
	for _, c := range []struct {
		name string
		v    int
	}{
		{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens},
		{"cached_input_tokens", u.CachedInputTokens}, {"preemptions", u.Preemptions},
		{"recomputed_tokens", u.RecomputedTokens},
	} {
		if c.v < 0 {
			add("%s is negative (%d)", c.name, c.v)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"queue_ms", u.QueueMs}, {"time_to_first_token_ms", u.TimeToFirstTokenMs},
		{"time_per_token_ms", u.TimePerTokenMs}, {"inter_token_ms_p50", u.InterTokenMsP50},
		{"inter_token_ms_p99", u.InterTokenMsP99}, {"total_ms", u.TotalMs},
		{"tool_execution_time_ms", u.ToolExecutionTimeMs}, {"memory_allocated_mb", u.MemoryAllocatedMB},
		{"confidence", u.Confidence},
	} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0 {
			add("%s must be a finite number ≥ 0, not %v", c.name, c.v)
		}
	}
	if u.Confidence > 1 {
		add("confidence %v is above 1", u.Confidence)
	}
	if u.Attempt < 1 {
		add("attempt %d is below 1", u.Attempt)
	}
	if u.CreatedAt.IsZero() {
		add("created_at is not set")
	}
	if u.FinishedAt.IsZero() {
		add("finished_at is not set")
	}
	if len(u.BatchID) > maxModelLen || len(u.CustomID) > maxModelLen {
		add("batch_id and custom_id must be at most %d bytes", maxModelLen)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidUsage, strings.Join(problems, "; "))
	}
	return nil
}

// insertUsage stores u (with raw, its message body) unless a record of the
// same job is stored already, and reports whether it stored it.
func insertUsage(ctx context.Context, db DB, u contracts.Usage, raw []byte, streamSeq uint64) (bool, error) {
	if err := EnsureTenant(ctx, db, u.Tenant, ""); err != nil {
		return false, err
	}
	var seq *int64
	if streamSeq > 0 && streamSeq <= math.MaxInt64 {
		s := int64(streamSeq)
		seq = &s
	}
	tag, err := db.Exec(ctx, `
		INSERT INTO usage (
			job_id, tenant_id, model, priority, bucket, status,
			input_tokens, output_tokens, cached_input_tokens,
			queue_ms, time_to_first_token_ms, time_per_token_ms,
			inter_token_ms_p50, inter_token_ms_p99, total_ms,
			tool_execution_time_ms, memory_allocated_mb,
			preemptions, recomputed_tokens, attempt,
			trace_id, worker_id, device, confidence,
			created_at, finished_at, raw, stream_seq, batch_id, custom_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
			$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28,
			NULLIF($29, ''), NULLIF($30, ''))
		ON CONFLICT (job_id) DO NOTHING`,
		u.JobID, u.Tenant, u.Model, string(u.Priority), string(u.Bucket), string(u.Status),
		u.InputTokens, u.OutputTokens, u.CachedInputTokens,
		FloatDecimal(u.QueueMs), FloatDecimal(u.TimeToFirstTokenMs), FloatDecimal(u.TimePerTokenMs),
		FloatDecimal(u.InterTokenMsP50), FloatDecimal(u.InterTokenMsP99), FloatDecimal(u.TotalMs),
		FloatDecimal(u.ToolExecutionTimeMs), FloatDecimal(u.MemoryAllocatedMB),
		u.Preemptions, u.RecomputedTokens, u.Attempt,
		u.TraceID, u.WorkerID, u.Device, FloatDecimal(u.Confidence),
		u.CreatedAt, u.FinishedAt, string(raw), seq, u.BatchID, u.CustomID,
	)
	if err != nil {
		return false, fmt.Errorf("billing: store usage of job %s: %w", u.JobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// GetUsage returns the stored usage record of job jobID, decoded from the
// message body kept with it, or an error wrapping ErrNotFound.
func GetUsage(ctx context.Context, db DB, jobID string) (contracts.Usage, error) {
	var raw []byte
	err := db.QueryRow(ctx, `SELECT raw FROM usage WHERE job_id = $1`, jobID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return contracts.Usage{}, fmt.Errorf("%w: usage of job %s", ErrNotFound, jobID)
	}
	if err != nil {
		return contracts.Usage{}, fmt.Errorf("billing: read usage of job %s: %w", jobID, err)
	}
	var u contracts.Usage
	if err := json.Unmarshal(raw, &u); err != nil {
		return contracts.Usage{}, fmt.Errorf("billing: decode stored usage of job %s: %w", jobID, err)
	}
	return u, nil
}

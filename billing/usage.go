package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/zerolayer/zerolayer/contracts"
)

// insertUsage stores u (with raw, its message body) unless a record of the
// same job of the same tenant is stored already, and reports whether it
// stored it. Job ids are unique per tenant only: another tenant's job of
// the same id is another job.
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
		ON CONFLICT (tenant_id, job_id) DO NOTHING`,
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
		return false, fmt.Errorf("billing: store usage of %s job %s: %w", u.Tenant, u.JobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// GetUsage returns the stored usage record of tenant's job jobID, decoded
// from the message body kept with it, or an error wrapping ErrNotFound.
func GetUsage(ctx context.Context, db DB, tenant, jobID string) (contracts.Usage, error) {
	var raw []byte
	err := db.QueryRow(ctx, `SELECT raw FROM usage WHERE tenant_id = $1 AND job_id = $2`, tenant, jobID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return contracts.Usage{}, fmt.Errorf("%w: usage of %s job %s", ErrNotFound, tenant, jobID)
	}
	if err != nil {
		return contracts.Usage{}, fmt.Errorf("billing: read usage of %s job %s: %w", tenant, jobID, err)
	}
	var u contracts.Usage
	if err := json.Unmarshal(raw, &u); err != nil {
		return contracts.Usage{}, fmt.Errorf("billing: decode stored usage of %s job %s: %w", tenant, jobID, err)
	}
	return u, nil
}

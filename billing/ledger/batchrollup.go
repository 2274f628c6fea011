package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/zerolayer/zerolayer/billing/price"
)

// BatchRollupArgs is the River job that recomputes one batch's totals in
// usage_batches from its charges. Rating a job of a batch inserts it (at
// most one waiting per batch); inserting it by hand repairs a batch.
type BatchRollupArgs struct {
	Tenant string `json:"tenant"`
	Batch  string `json:"batch"`
}

// Kind implements river.JobArgs.
func (BatchRollupArgs) Kind() string { return "zl_billing_batch_rollup" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (BatchRollupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, Priority: 2, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: activeStates}}
}

// batchLock is the advisory lock of a batch's totals: charges of the batch
// are written under its shared side and the rollup computed under the
// exclusive one, so a rollup never misses a charge committed while it runs.
const batchLock = `hashtext('zl_usage_batches'), hashtext(current_schema() || '/' || $1 || '/' || $2)`

// BatchTotal is one row of usage_batches: a batch's rated jobs in one
// currency.
type BatchTotal struct {
	Tenant   string `json:"tenant"`
	Batch    string `json:"batch"`
	Currency string `json:"currency"`
	// Jobs counts the rated jobs; Completed, Failed and Canceled split it.
	Jobs      int64 `json:"jobs"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
	// InputTokens, OutputTokens and CachedInputTokens add up the jobs'.
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	// EmbeddingInputTokens is the part of InputTokens that embedding jobs
	// used.
	EmbeddingInputTokens int64 `json:"embedding_input_tokens"`
	// Cost adds up the charges per dimension, unrounded.
	Cost price.Breakdown `json:"cost"`
	// FirstCreatedAt and LastFinishedAt bound the batch's jobs.
	FirstCreatedAt time.Time `json:"first_created_at"`
	LastFinishedAt time.Time `json:"last_finished_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// BatchTotals returns tenant's usage_batches rows, most recently finished
// first; none for a tenant without batches, and ErrUnknownTenant for a
// tenant billing has never heard of.
func BatchTotals(ctx context.Context, db DB, tenant string) ([]BatchTotal, error) {
	if err := CheckTenant(ctx, db, tenant); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		SELECT tenant_id, batch_id, currency, jobs, completed, failed, canceled, input_tokens, output_tokens, cached_input_tokens,
			embedding_input_tokens, cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total,
			first_created_at, last_finished_at, updated_at
		FROM usage_batches WHERE tenant_id = $1
		ORDER BY last_finished_at DESC, batch_id, currency`, tenant)
	if err != nil {
		return nil, fmt.Errorf("billing: read batch totals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BatchTotal, error) {
		var b BatchTotal
		err := row.Scan(&b.Tenant, &b.Batch, &b.Currency, &b.Jobs, &b.Completed, &b.Failed, &b.Canceled,
			&b.InputTokens, &b.OutputTokens, &b.CachedInputTokens, &b.EmbeddingInputTokens,
			&b.Cost.Input, &b.Cost.CachedInput, &b.Cost.EmbeddingInput, &b.Cost.Output, &b.Cost.TTFT, &b.Cost.Tool, &b.Cost.Total, &b.FirstCreatedAt, &b.LastFinishedAt, &b.UpdatedAt)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: read batch totals: %w", err)
	}
	return out, nil
}

// batchRollupWorker recomputes a batch's totals under the exclusive side
// of its lock, completing its River job in the same transaction.
type batchRollupWorker struct {
	river.WorkerDefaults[BatchRollupArgs]
	db *pgxpool.Pool
}

func (w *batchRollupWorker) Work(ctx context.Context, job *river.Job[BatchRollupArgs]) error {
	a := job.Args
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+batchLock+`)`, a.Tenant, a.Batch); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM usage_batches WHERE tenant_id = $1 AND batch_id = $2`, a.Tenant, a.Batch); err != nil {
			return fmt.Errorf("billing: batch rollup: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO usage_batches (tenant_id, batch_id, currency, jobs, completed, failed, canceled,
				input_tokens, output_tokens, cached_input_tokens, embedding_input_tokens,
				cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total,
				first_created_at, last_finished_at)
			SELECT u.tenant_id, u.batch_id, c.currency, count(*),
				count(*) FILTER (WHERE u.status = 'completed'), count(*) FILTER (WHERE u.status = 'failed'),
				count(*) FILTER (WHERE u.status = 'canceled'),
				sum(u.input_tokens), sum(u.output_tokens), sum(u.cached_input_tokens),
				coalesce(sum(u.input_tokens) FILTER (WHERE u.kind = 'embedding'), 0),
				sum(c.cost_input), sum(c.cost_cached_input), sum(c.cost_embedding_input), sum(c.cost_output), sum(c.cost_ttft),
				sum(c.cost_tool), sum(c.total), min(u.created_at), max(u.finished_at)
			FROM charges c JOIN usage u USING (tenant_id, job_id)
			WHERE u.tenant_id = $1 AND u.batch_id = $2
			GROUP BY u.tenant_id, u.batch_id, c.currency`, a.Tenant, a.Batch); err != nil {
			return fmt.Errorf("billing: batch rollup: %w", err)
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

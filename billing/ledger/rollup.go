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

// RollupArgs is the River job that recomputes one tenant's totals of one
// UTC day in usage_daily from its charges. Rating and re-rating insert it
// (at most one waiting per tenant and day); inserting it by hand repairs a
// day.
type RollupArgs struct {
	// Tenant is the tenant.
	Tenant string `json:"tenant"`
	// Day is the UTC day of the usage records' created_at, as 2006-01-02.
	Day string `json:"day"`
}

// Kind implements river.JobArgs.
func (RollupArgs) Kind() string { return "zl_billing_rollup" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RollupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, Priority: 2, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: activeStates}}
}

// after schedules a job delay from now; nil (at once) when delay <= 0.
func after(delay time.Duration) *river.InsertOpts {
	if delay <= 0 {
		return nil
	}
	return &river.InsertOpts{ScheduledAt: time.Now().Add(delay)}
}

// dayLock is the advisory lock of a tenant's day ($1 tenant, $2 day):
// charges are written under its shared side, the rollup computed under
// the exclusive one.
const dayLock = `hashtext('zl_usage_daily'), hashtext(current_schema() || '/' || $1 || '/' || $2)`

// DailyTotal is one row of usage_daily: a tenant's rated jobs of one UTC
// day, in one currency.
type DailyTotal struct {
	// Tenant is the tenant.
	Tenant string `json:"tenant"`
	// Day is the UTC day of the usage's created_at, as 2006-01-02.
	Day string `json:"day"`
	// Currency is the charges' currency.
	Currency string `json:"currency"`
	// Jobs counts the rated jobs.
	Jobs int64 `json:"jobs"`
	// InputTokens, OutputTokens and CachedInputTokens add up the jobs'.
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	// EmbeddingInputTokens is the part of InputTokens that embedding jobs
	// used.
	EmbeddingInputTokens int64 `json:"embedding_input_tokens"`
	// Cost adds up the jobs' charges per dimension, unrounded.
	Cost price.Breakdown `json:"cost"`
	// UpdatedAt is when the row was last recomputed.
	UpdatedAt time.Time `json:"updated_at"`
}

// DailyTotals returns tenant's usage_daily rows with from <= day < to (days
// as 2006-01-02), oldest first.
func DailyTotals(ctx context.Context, db DB, tenant, from, to string) ([]DailyTotal, error) {
	rows, err := db.Query(ctx, `
		SELECT tenant_id, to_char(day, 'YYYY-MM-DD'), currency, jobs, input_tokens, output_tokens, cached_input_tokens,
			embedding_input_tokens, cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total, updated_at
		FROM usage_daily
		WHERE tenant_id = $1 AND day >= $2::date AND day < $3::date
		ORDER BY day, currency`, tenant, from, to)
	if err != nil {
		return nil, fmt.Errorf("billing: read daily totals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DailyTotal, error) {
		var d DailyTotal
		err := row.Scan(&d.Tenant, &d.Day, &d.Currency, &d.Jobs, &d.InputTokens, &d.OutputTokens, &d.CachedInputTokens,
			&d.EmbeddingInputTokens, &d.Cost.Input, &d.Cost.CachedInput, &d.Cost.EmbeddingInput, &d.Cost.Output, &d.Cost.TTFT, &d.Cost.Tool, &d.Cost.Total, &d.UpdatedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: read daily totals: %w", err)
	}
	return out, nil
}

// rollupWorker recomputes a day. It takes the exclusive side of the day's
// lock and completes its River job in the same transaction, so that a
// rating transaction either commits before the rollup reads the charges,
// or finds the rollup job completed and inserts a new one.
type rollupWorker struct {
	river.WorkerDefaults[RollupArgs]
	db *pgxpool.Pool
}

func (w *rollupWorker) Work(ctx context.Context, job *river.Job[RollupArgs]) error {
	day, err := time.Parse(time.DateOnly, job.Args.Day)
	if err != nil {
		return river.JobCancel(fmt.Errorf("billing: rollup day %q is not 2006-01-02: %w", job.Args.Day, err))
	}
	from, to := day.UTC(), day.UTC().AddDate(0, 0, 1)
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+dayLock+`)`,
			job.Args.Tenant, job.Args.Day); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM usage_daily WHERE tenant_id = $1 AND day = $2::date`, job.Args.Tenant, job.Args.Day); err != nil {
			return fmt.Errorf("billing: rollup: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO usage_daily (tenant_id, day, currency, jobs, input_tokens, output_tokens, cached_input_tokens,
				embedding_input_tokens, cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total)
			SELECT u.tenant_id, $2::date, c.currency, count(*), sum(u.input_tokens), sum(u.output_tokens), sum(u.cached_input_tokens),
				coalesce(sum(u.input_tokens) FILTER (WHERE u.kind = 'embedding'), 0),
				sum(c.cost_input), sum(c.cost_cached_input), sum(c.cost_embedding_input), sum(c.cost_output), sum(c.cost_ttft),
				sum(c.cost_tool), sum(c.total)
			FROM charges c JOIN usage u USING (tenant_id, job_id)
			WHERE u.tenant_id = $1 AND u.created_at >= $3 AND u.created_at < $4
			GROUP BY u.tenant_id, c.currency`,
			job.Args.Tenant, job.Args.Day, from, to); err != nil {
			return fmt.Errorf("billing: rollup: %w", err)
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

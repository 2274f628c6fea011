package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/zerolayer/zerolayer/contracts"
)

// Queue is the River queue of billing's jobs.
const Queue = "billing"

// activeStates are the job states a unique billing job is deduplicated
// against: a job waiting or running, not one that has finished, so that
// the same work can be asked for again later.
var activeStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// RateArgs is the River job that prices one stored usage record. The
// ingester inserts it in the transaction that stores the record; it is
// unique per tenant and job id.
type RateArgs struct {
	// Tenant is the usage record's tenant.
	Tenant string `json:"tenant"`
	// JobID is the usage record's job, unique within Tenant only.
	JobID string `json:"job_id"`
}

// Kind implements river.JobArgs.
func (RateArgs) Kind() string { return "zl_billing_rate" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, Priority: 1, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// RerateArgs is the River job that prices an already rated job again, for
// instance after a corrected price book version was added. The previous
// charge moves to charge_history and the charge records the book and
// version used now, with its revision one higher. Insert it with any River
// client of the billing schema:
//
//	client.Insert(ctx, billing.RerateArgs{Tenant: tenant, JobID: id}, nil)
type RerateArgs struct {
	// Tenant is the tenant of the job to price again.
	Tenant string `json:"tenant"`
	// JobID is the job to price again, unique within Tenant only.
	JobID string `json:"job_id"`
	// PriceBookID, when not 0, is the price book to use; it must apply to
	// the job's tenant and model. When 0 the book in force at the usage's
	// created_at is looked up again (EffectivePriceBook).
	PriceBookID int64 `json:"price_book_id,omitempty"`
}

// Kind implements river.JobArgs.
func (RerateArgs) Kind() string { return "zl_billing_rerate" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RerateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, Priority: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: activeStates}}
}

// Charge is a rated job: its cost under one price book version, and its
// value tags.
type Charge struct {
	// JobID is the job, unique within Tenant only.
	JobID string `json:"job_id"`
	// Tenant and Model are the job's.
	Tenant string `json:"tenant"`
	Model  string `json:"model"`
	// PriceBookID and PriceBookVersion identify the book used.
	PriceBookID      int64 `json:"price_book_id"`
	PriceBookVersion int   `json:"price_book_version"`
	// Currency is the book's currency.
	Currency string `json:"currency"`
	// Cost is the unrounded cost per dimension.
	Cost Breakdown `json:"cost"`
	// Tags are the value tags, sorted.
	Tags []string `json:"tags"`
	// Revision is 1 for the first rating and one more per re-rating.
	Revision int `json:"revision"`
	// RatedAt is when the charge was made.
	RatedAt time.Time `json:"rated_at"`
}

// GetCharge returns the charge of tenant's job jobID, or an error wrapping
// ErrNotFound when it is not rated (yet).
func GetCharge(ctx context.Context, db DB, tenant, jobID string) (Charge, error) {
	var c Charge
	err := db.QueryRow(ctx, `
		SELECT job_id, tenant_id, model, price_book_id, price_book_version, currency,
			cost_input, cost_output, cost_ttft, cost_tool, total, tags, revision, rated_at
		FROM charges WHERE tenant_id = $1 AND job_id = $2`, tenant, jobID).Scan(
		&c.JobID, &c.Tenant, &c.Model, &c.PriceBookID, &c.PriceBookVersion, &c.Currency,
		&c.Cost.Input, &c.Cost.Output, &c.Cost.TTFT, &c.Cost.Tool, &c.Cost.Total, &c.Tags, &c.Revision, &c.RatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Charge{}, fmt.Errorf("%w: charge of %s job %s", ErrNotFound, tenant, jobID)
	}
	if err != nil {
		return Charge{}, fmt.Errorf("billing: read charge of %s job %s: %w", tenant, jobID, err)
	}
	return c, nil
}

// price computes the charge of u under pb with the tenant's tag rules.
func price(ctx context.Context, tx pgx.Tx, u contracts.Usage, pb PriceBook) (Charge, error) {
	rules, err := LoadTagRules(ctx, tx, u.Tenant)
	if err != nil {
		return Charge{}, err
	}
	return Charge{
		JobID:            u.JobID,
		Tenant:           u.Tenant,
		Model:            u.Model,
		PriceBookID:      pb.ID,
		PriceBookVersion: pb.Version,
		Currency:         pb.Currency,
		Cost:             Cost(u, pb),
		Tags:             Tags(u, rules),
		Revision:         1,
	}, nil
}

// usageDay is the UTC day a usage record is rolled up into.
func usageDay(u contracts.Usage) string { return u.CreatedAt.UTC().Format(time.DateOnly) }

// lockDayShared takes the shared side of the lock of (tenant, day) for the
// rest of tx. Charges of one day are written under the shared lock and the
// rollup of that day is computed under the exclusive one, so a rollup never
// misses a charge committed while it runs (see rollupWorker).
func lockDayShared(ctx context.Context, tx pgx.Tx, tenant, day string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+dayLock+`)`, tenant, day)
	return err
}

// usageToRate loads the usage record of tenant's job jobID and takes the
// shared lock of its day for the rest of tx. A missing record (only a
// deleted usage row gets here) cancels the River job: there is nothing to
// bill.
func usageToRate(ctx context.Context, tx pgx.Tx, tenant, jobID string) (contracts.Usage, error) {
	u, err := GetUsage(ctx, tx, tenant, jobID)
	if errors.Is(err, ErrNotFound) {
		return u, river.JobCancel(err)
	}
	if err != nil {
		return u, err
	}
	return u, lockDayShared(ctx, tx, u.Tenant, usageDay(u))
}

// rateWorker prices a newly stored usage record.
type rateWorker struct {
	river.WorkerDefaults[RateArgs]
	db          *pgxpool.Pool
	rollupDelay time.Duration
}

func (w *rateWorker) Work(ctx context.Context, job *river.Job[RateArgs]) error {
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		u, err := usageToRate(ctx, tx, job.Args.Tenant, job.Args.JobID)
		if err != nil {
			return err
		}
		pb, err := EffectivePriceBook(ctx, tx, u.Tenant, u.Model, u.CreatedAt)
		if err != nil {
			return err
		}
		if err := storeCharge(ctx, tx, u, pb, false, w.rollupDelay); err != nil {
			return err
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// chargeInsert stores a charge; with chargeReplace a re-rating replaces
// the row and counts a revision.
const (
	chargeInsert = `
		INSERT INTO charges (job_id, tenant_id, model, price_book_id, price_book_version, currency,
			cost_input, cost_output, cost_ttft, cost_tool, total, tags)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	chargeReplace = `
		ON CONFLICT (tenant_id, job_id) DO UPDATE SET
			price_book_id = excluded.price_book_id,
			price_book_version = excluded.price_book_version,
			currency = excluded.currency,
			cost_input = excluded.cost_input,
			cost_output = excluded.cost_output,
			cost_ttft = excluded.cost_ttft,
			cost_tool = excluded.cost_tool,
			total = excluded.total,
			tags = excluded.tags,
			revision = charges.revision + 1,
			rated_at = now()`
)

// storeCharge prices u with pb and stores the charge within tx: a first
// rating only when the job has none, a re-rating (rerate) in place of the
// one it has. A charge stored asks for the rollups of its day and batch.
func storeCharge(ctx context.Context, tx pgx.Tx, u contracts.Usage, pb PriceBook, rerate bool, rollupDelay time.Duration) error {
	c, err := price(ctx, tx, u, pb)
	if err != nil {
		return err
	}
	query := chargeInsert + ` ON CONFLICT (tenant_id, job_id) DO NOTHING`
	if rerate {
		if _, err := tx.Exec(ctx, `
			INSERT INTO charge_history (tenant_id, job_id, revision, price_book_id, price_book_version, currency,
				cost_input, cost_output, cost_ttft, cost_tool, total, tags, rated_at)
			SELECT tenant_id, job_id, revision, price_book_id, price_book_version, currency,
				cost_input, cost_output, cost_ttft, cost_tool, total, tags, rated_at
			FROM charges WHERE tenant_id = $1 AND job_id = $2`, c.Tenant, c.JobID); err != nil {
			return fmt.Errorf("billing: keep the previous charge of %s job %s: %w", c.Tenant, c.JobID, err)
		}
		query = chargeInsert + chargeReplace
	}
	tag, err := tx.Exec(ctx, query, c.JobID, c.Tenant, c.Model, c.PriceBookID, c.PriceBookVersion, c.Currency,
		c.Cost.Input, c.Cost.Output, c.Cost.TTFT, c.Cost.Tool, c.Cost.Total, c.Tags)
	if err != nil {
		return fmt.Errorf("billing: store charge of %s job %s: %w", c.Tenant, c.JobID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil // rated already
	}
	if err := noteBatchCharge(ctx, tx, u.Tenant, u.BatchID, rollupDelay); err != nil {
		return err
	}
	return insertRollup(ctx, tx, u.Tenant, usageDay(u), rollupDelay)
}

// rerateWorker prices a job again.
type rerateWorker struct {
	river.WorkerDefaults[RerateArgs]
	db          *pgxpool.Pool
	rollupDelay time.Duration
}

func (w *rerateWorker) Work(ctx context.Context, job *river.Job[RerateArgs]) error {
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		u, err := usageToRate(ctx, tx, job.Args.Tenant, job.Args.JobID)
		if err != nil {
			return err
		}
		var pb PriceBook
		if job.Args.PriceBookID != 0 {
			pb, err = GetPriceBook(ctx, tx, job.Args.PriceBookID)
			if errors.Is(err, ErrNotFound) {
				return river.JobCancel(err)
			}
			if err == nil && !pb.appliesTo(u.Tenant, u.Model) {
				return river.JobCancel(fmt.Errorf("%w: book %d (tenant %q, model %q) for job %s of tenant %s, model %s",
					ErrPriceBookMismatch, pb.ID, pb.Tenant, pb.Model, u.JobID, u.Tenant, u.Model))
			}
		} else {
			pb, err = EffectivePriceBook(ctx, tx, u.Tenant, u.Model, u.CreatedAt)
		}
		if err != nil {
			return err
		}
		if err := storeCharge(ctx, tx, u, pb, true, w.rollupDelay); err != nil {
			return err
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

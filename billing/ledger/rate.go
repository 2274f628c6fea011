package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// Queue is the River queue of billing's jobs but the ratings.
const Queue = "billing"

// RateQueue is the River queue of the rating jobs (RateArgs and
// RateBatchArgs). They have a queue of their own because they are worked
// many at once (RiverConfig.RateWorkers) but hold a database connection
// only while they lead their rating group, where the other jobs (rollups,
// re-ratings) each hold one while they run.
const RateQueue = "billing_rate"

// activeStates are the job states a unique billing job is deduplicated
// against: a job waiting or running, not one that has finished, so that
// the same work can be asked for again later.
var activeStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// RateArgs is the River job that prices one stored usage record. The
// ingester inserts it in the transaction that stores the record; it is
// unique per tenant and job id. The records of the RateArgs (and
// RateBatchArgs) jobs a client runs at once are rated together, in one
// transaction.
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
	return river.InsertOpts{Queue: RateQueue, Priority: 1, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// RerateArgs is the River job that prices an already rated job again, for
// instance after a corrected price book version was added. The previous
// charge moves to charge_history and the charge records the book and
// version used now, with its revision one higher. Insert it with any River
// client of the billing schema:
//
//	client.Insert(ctx, ledger.RerateArgs{Tenant: tenant, JobID: id}, nil)
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
	Cost price.Breakdown `json:"cost"`
	// Multiplier is the book's multiplier for the job's priority and batch
	// (price.Book.Multiplier), already applied to every dimension of Cost.
	Multiplier decimal.Decimal `json:"multiplier"`
	// Period is the billing period (month, as 2006-01) the charge is
	// invoiced in: its usage's month, or the first open month after it
	// when that month was invoiced before the usage was rated.
	Period string `json:"period"`
	// Note explains a charge invoiced after its usage's month; empty
	// otherwise.
	Note string `json:"note,omitempty"`
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
	err := db.QueryRow(ctx, `SELECT `+chargeColumns+` FROM charges WHERE tenant_id = $1 AND job_id = $2`, tenant, jobID).Scan(c.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Charge{}, fmt.Errorf("%w: charge of %s job %s", ErrNotFound, tenant, jobID)
	}
	if err != nil {
		return Charge{}, fmt.Errorf("billing: read charge of %s job %s: %w", tenant, jobID, err)
	}
	return c, nil
}

// chargeColumns are the columns of charges that Charge.dest scans.
const chargeColumns = `job_id, tenant_id, model, price_book_id, price_book_version, currency,
	cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total, multiplier, to_char(period, 'YYYY-MM'), note,
	tags, revision, rated_at`

// dest returns where to scan chargeColumns into.
func (c *Charge) dest() []any {
	return []any{&c.JobID, &c.Tenant, &c.Model, &c.PriceBookID, &c.PriceBookVersion, &c.Currency,
		&c.Cost.Input, &c.Cost.CachedInput, &c.Cost.EmbeddingInput, &c.Cost.Output, &c.Cost.TTFT, &c.Cost.Tool, &c.Cost.Total, &c.Multiplier, &c.Period, &c.Note,
		&c.Tags, &c.Revision, &c.RatedAt}
}

// newCharge is the first charge of u under pb with the tag rules in force.
func newCharge(u contracts.Usage, pb price.Book, rules []TagRule) Charge {
	return Charge{
		JobID:            u.JobID,
		Tenant:           u.Tenant,
		Model:            u.Model,
		PriceBookID:      pb.ID,
		PriceBookVersion: pb.Version,
		Currency:         pb.Currency,
		Cost:             price.Cost(u, pb),
		Multiplier:       pb.Multiplier(u.Priority, u.BatchID != ""),
		Period:           PeriodName(MonthOf(u.CreatedAt)),
		Tags:             Tags(u, rules),
		Revision:         1,
	}
}

// usageDay is the UTC day a usage record is rolled up into.
func usageDay(u contracts.Usage) string { return u.CreatedAt.UTC().Format(time.DateOnly) }

// rater rates stored usage records for the rating workers of one River
// client: the records of the RateArgs and RateBatchArgs jobs running at
// once are rated together (rateGroup), in one transaction (rateTx).
type rater struct {
	db          *pgxpool.Pool
	rollupDelay time.Duration
	group       rateGroup
}

// rate rates jobs with the records queued beside them and returns each
// one's error (see rateTx), or the error of their transaction.
func (r *rater) rate(ctx context.Context, jobs []JobRef) ([]error, error) {
	return r.group.do(ctx, jobs, func(ctx context.Context, jobs []JobRef) (errs []error, err error) {
		err = pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
			errs, err = rateTx(ctx, tx, jobs, r.rollupDelay)
			return err
		})
		return errs, err
	})
}

// rateWorker prices a newly stored usage record. A charge is unique on the
// tenant and job id, and a job with a charge already is left alone, so a
// job run again (a retry, a rescue after a crash) bills nothing twice; the
// job completes after the commit.
type rateWorker struct {
	river.WorkerDefaults[RateArgs]
	*rater
}

// Work returns nil once the record is charged (or was before), a JobCancel
// for a record that is not stored (only a deleted usage row gets here:
// there is nothing to bill), and the record's error otherwise
// (ErrNoPriceBook: River retries it).
func (w *rateWorker) Work(ctx context.Context, job *river.Job[RateArgs]) error {
	errs, err := w.rate(ctx, []JobRef{{job.Args.Tenant, job.Args.JobID}})
	switch {
	case err != nil:
		return err
	case errors.Is(errs[0], ErrNotFound):
		return river.JobCancel(errs[0])
	}
	return errs[0]
}

// rateTx rates the stored usage records of jobs within tx: it reads them,
// looks up their price books and tag rules, stores their charges with one
// statement (a job with a charge already is left alone) and asks for the
// rollups of their days and batches. It returns each job's error: nil when
// charged (now or before), one wrapping ErrNotFound for a record not
// stored, ErrNoPriceBook for one no book prices yet, a decoding error for
// a stored body that does not decode. The error returned is the
// transaction's: tx is then unusable.
func rateTx(ctx context.Context, tx pgx.Tx, jobs []JobRef, rollupDelay time.Duration) ([]error, error) {
	errs := make([]error, len(jobs))
	stored, err := getUsages(ctx, tx, jobs)
	if err != nil {
		return nil, err
	}
	var us []contracts.Usage
	var at []int // us[k] is jobs[at[k]]'s
	for i, s := range stored {
		if errs[i] = s.err; s.err == nil {
			us, at = append(us, s.u), append(at, i)
		}
	}
	if len(us) == 0 {
		return errs, nil
	}
	cs, err := priceMany(ctx, tx, us)
	if err != nil {
		return nil, err
	}
	var charges []Charge
	var charged []contracts.Usage
	for k, c := range cs {
		if c == nil {
			u := us[k]
			errs[at[k]] = noPriceBook(u.Tenant, u.Model, u.CreatedAt)
			continue
		}
		charges, charged = append(charges, *c), append(charged, us[k])
	}
	if len(charges) == 0 {
		return errs, nil
	}
	keys := make([]periodKey, len(charged))
	for k, u := range charged {
		keys[k] = periodKey{u.Tenant, MonthOf(u.CreatedAt)}
	}
	places, err := placeCharges(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	for k := range charges {
		p := places[keys[k]]
		charges[k].Period, charges[k].Note = PeriodName(p.Period), p.Note
	}
	inserted, err := insertCharges(ctx, tx, charges)
	if err != nil {
		return nil, err
	}
	var fresh []contracts.Usage
	for k, ok := range inserted {
		if ok {
			fresh = append(fresh, charged[k])
		}
	}
	return errs, noteCharges(ctx, tx, fresh, rollupDelay)
}

// priceMany prices us (each with the book in force at its created_at and
// its tenant's tag rules) with two queries; nil where no book applies.
func priceMany(ctx context.Context, tx pgx.Tx, us []contracts.Usage) ([]*Charge, error) {
	qs := make([]bookFor, len(us))
	var tenants []string
	for i, u := range us {
		qs[i] = bookFor{u.Tenant, u.Model, u.CreatedAt}
		tenants = append(tenants, u.Tenant)
	}
	books, err := effectivePriceBooks(ctx, tx, qs)
	if err != nil {
		return nil, err
	}
	rules, err := loadTagRules(ctx, tx, slices.Compact(slices.Sorted(slices.Values(tenants))))
	if err != nil {
		return nil, fmt.Errorf("billing: load tag rules: %w", err)
	}
	out := make([]*Charge, len(us))
	for i, u := range us {
		if books[i] != nil {
			c := newCharge(u, *books[i], rules[u.Tenant])
			out[i] = &c
		}
	}
	return out, nil
}

// chargeArrays are charges as the column arrays the set-based statements
// unnest: costs are input, cached input, embedding input, output, ttft,
// tool, total and the multiplier, as decimal text.
type chargeArrays struct {
	jobIDs, tenants, models, currencies, tags, periods, notes []string
	bookIDs, versions                                         []int64
	costs                                                     [8][]string
}

func chargeArraysOf(cs []Charge) chargeArrays {
	n := len(cs)
	a := chargeArrays{jobIDs: make([]string, n), tenants: make([]string, n), models: make([]string, n), currencies: make([]string, n),
		tags: make([]string, n), periods: make([]string, n), notes: make([]string, n), bookIDs: make([]int64, n), versions: make([]int64, n)}
	for d := range a.costs {
		a.costs[d] = make([]string, n)
	}
	for i, c := range cs {
		a.jobIDs[i], a.tenants[i], a.models[i], a.currencies[i] = c.JobID, c.Tenant, c.Model, c.Currency
		// Tags match ^[a-z][a-z0-9_]{0,62}$ (value_tag_rules): no comma.
		a.tags[i] = strings.Join(c.Tags, ",")
		a.bookIDs[i], a.versions[i] = c.PriceBookID, int64(c.PriceBookVersion)
		a.periods[i], a.notes[i] = c.Period+"-01", c.Note
		for d, v := range []decimal.Decimal{c.Cost.Input, c.Cost.CachedInput, c.Cost.EmbeddingInput, c.Cost.Output, c.Cost.TTFT, c.Cost.Tool, c.Cost.Total, c.Multiplier} {
			a.costs[d][i] = v.String()
		}
	}
	return a
}

// insertCharges stores cs with one statement, each unless its job has a
// charge already, and reports which it stored. Rows go in key order, so
// that two transactions charging the same jobs wait for each other
// instead of deadlocking.
func insertCharges(ctx context.Context, tx pgx.Tx, cs []Charge) ([]bool, error) {
	n := len(cs)
	a := chargeArraysOf(cs)
	first := make(map[JobRef]int, n)
	for i, c := range cs {
		if _, dup := first[JobRef{c.Tenant, c.JobID}]; !dup {
			first[JobRef{c.Tenant, c.JobID}] = i
		}
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO charges (job_id, tenant_id, model, price_book_id, price_book_version, currency,
			cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total, multiplier, tags, period, note)
		SELECT job_id, tenant_id, model, book_id, version::integer, currency,
			cost_input::numeric, cost_cached_input::numeric, cost_embedding_input::numeric, cost_output::numeric, cost_ttft::numeric,
			cost_tool::numeric, total::numeric, multiplier::numeric, string_to_array(tags, ','), period::date, note
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[],
			$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[],
			$17::text[])
			AS c(job_id, tenant_id, model, book_id, version, currency, cost_input, cost_cached_input, cost_embedding_input, cost_output,
				cost_ttft, cost_tool, total, multiplier, tags, period, note)
		ORDER BY tenant_id, job_id
		ON CONFLICT (tenant_id, job_id) DO NOTHING
		RETURNING tenant_id, job_id`,
		a.jobIDs, a.tenants, a.models, a.bookIDs, a.versions, a.currencies, a.costs[0], a.costs[1], a.costs[2], a.costs[3], a.costs[4],
		a.costs[5], a.costs[6], a.costs[7], a.tags, a.periods, a.notes)
	if err != nil {
		return nil, fmt.Errorf("billing: store %d charges: %w", n, err)
	}
	inserted := make([]bool, n)
	var key JobRef
	if _, err := pgx.ForEachRow(rows, []any{&key.Tenant, &key.JobID}, func() error {
		inserted[first[key]] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("billing: store %d charges: %w", n, err)
	}
	return inserted, nil
}

// noteCharges, within the transaction that charged us, asks for the
// rollups of their days and batches after delay, holding the shared side
// of each one's lock first (see rollupWorker): the days' locks, then the
// batches', each set in key order, so that no two rating transactions wait
// for each other in a cycle.
func noteCharges(ctx context.Context, tx pgx.Tx, us []contracts.Usage, delay time.Duration) error {
	var days, batches [][2]string
	for _, u := range us {
		days = append(days, [2]string{u.Tenant, usageDay(u)})
		if u.BatchID != "" {
			batches = append(batches, [2]string{u.Tenant, u.BatchID})
		}
	}
	days = slices.Compact(slices.SortedFunc(slices.Values(days), compareKeys))
	batches = slices.Compact(slices.SortedFunc(slices.Values(batches), compareKeys))
	var jobs []river.InsertManyParams
	if err := lockShared(ctx, tx, dayLock, days); err != nil {
		return fmt.Errorf("billing: lock the days of %d charges: %w", len(us), err)
	}
	for _, d := range days {
		jobs = append(jobs, river.InsertManyParams{Args: RollupArgs{Tenant: d[0], Day: d[1]}, InsertOpts: after(delay)})
	}
	if err := lockShared(ctx, tx, batchLock, batches); err != nil {
		return fmt.Errorf("billing: lock the batches of %d charges: %w", len(us), err)
	}
	for _, b := range batches {
		jobs = append(jobs, river.InsertManyParams{Args: BatchRollupArgs{Tenant: b[0], Batch: b[1]}, InsertOpts: after(delay)})
	}
	if len(jobs) == 0 {
		return nil
	}
	if _, err := river.ClientFromContext[pgx.Tx](ctx).InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("billing: enqueue the rollups of %d charges: %w", len(us), err)
	}
	return nil
}

func compareKeys(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

// lockShared takes, for the rest of tx, the shared side of lock (dayLock
// or batchLock, of $1 and $2) for each of pairs, in the order of the locks'
// keys.
func lockShared(ctx context.Context, tx pgx.Tx, lock string, pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	a, b := make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		a[i], b[i] = p[0], p[1]
	}
	keys := strings.NewReplacer("$1", "p.a", "$2", "p.b").Replace(lock)
	// The lock function is volatile: Postgres calls it after the sort.
	_, err := tx.Exec(ctx, `
		SELECT pg_advisory_xact_lock_shared(k1, k2)
		FROM (SELECT DISTINCT `+keys+` FROM unnest($1::text[], $2::text[]) AS p(a, b)) AS k(k1, k2)
		ORDER BY k1, k2`, a, b)
	return err
}

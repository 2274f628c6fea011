package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// RerateRangeArgs is the River job that prices again every usage record of
// one tenant created in [From, To), optionally of one model: the bulk
// re-rating of a period after a price book was added, ended or corrected.
// It works in transactions of rerateChunk records; a charge whose price,
// book and tags come out the same is left alone, so the job run again
// after a failure redoes nothing twice. A changed charge moves to
// charge_history (with ReplacedBy) and the rollups of its day and batch
// catch up. A period already invoiced is refused (ErrPeriodLocked): the
// job is cancelled with the charges of earlier transactions re-rated, and
// the invoice, which was closed on those, stays right. The job records its
// RerateSummary as its output (river.RecordOutput).
type RerateRangeArgs struct {
	// Tenant is the tenant whose records are re-rated.
	Tenant string `json:"tenant"`
	// From and To bound the usage's created_at: From <= created_at < To.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Period, when set (2006-01) instead of From and To, selects the
	// records by billing month: those whose charges are invoiced in it,
	// late usage of earlier months included.
	Period string `json:"period,omitempty"`
	// Model, when set, re-rates that model's records only.
	Model string `json:"model,omitempty"`
	// PriceBookID, when not 0, is the book to use for every record; it
	// must apply to each one's tenant and model. When 0 each record gets
	// the book in force at its created_at (EffectivePriceBook).
	PriceBookID int64 `json:"price_book_id,omitempty"`
	// By says who asked, and why; kept with each replaced charge.
	By string `json:"by"`
}

// Kind implements river.JobArgs.
func (RerateRangeArgs) Kind() string { return "zl_billing_rerate_range" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RerateRangeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, Priority: 3, MaxAttempts: 5}
}

// Validate reports arguments that cannot be worked.
func (a RerateRangeArgs) Validate() error {
	if err := contracts.ValidateTenant(a.Tenant); err != nil {
		return err
	}
	if a.Period != "" {
		if !a.From.IsZero() || !a.To.IsZero() {
			return fmt.Errorf("%w: give a billing month or a usage period [From, To), not both", ErrInvalidPeriod)
		}
		_, err := ParsePeriod(a.Period)
		return err
	}
	if !a.From.Before(a.To) {
		return fmt.Errorf("%w: the re-rating period [%s, %s) is empty", ErrInvalidPeriod, a.From.Format(time.RFC3339), a.To.Format(time.RFC3339))
	}
	return nil
}

// rerateChunk is the number of records one re-rating transaction takes.
const rerateChunk = 1000

// RerateSummary is what a re-rating did, or, dry, would do.
type RerateSummary struct {
	// Tenant, From, To, Period and Model are the re-rating's.
	Tenant string    `json:"tenant"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Period string    `json:"period,omitempty"`
	Model  string    `json:"model,omitempty"`
	// DryRun is set when nothing was written.
	DryRun bool `json:"dry_run"`
	// Jobs counts the records looked at; Changed those whose charge
	// changed (or would), and New those that had no charge yet.
	Jobs    int64 `json:"jobs"`
	Changed int64 `json:"changed"`
	New     int64 `json:"new"`
	// Before and After are the records' charges before and after, per
	// dimension (a record without a charge before counts zero there).
	Before price.Breakdown `json:"before"`
	After  price.Breakdown `json:"after"`
	// Books counts the changed charges by the change of book, as
	// "pb1 → pb4".
	Books map[string]int64 `json:"books,omitempty"`
	// Currency is the charges' currency ("" when there are none).
	Currency string `json:"currency"`
}

// Difference is After.Total − Before.Total.
func (s RerateSummary) Difference() decimal.Decimal { return s.After.Total.Sub(s.Before.Total) }

func (s *RerateSummary) add(o RerateSummary) {
	s.Jobs += o.Jobs
	s.Changed += o.Changed
	s.New += o.New
	s.Before, s.After = s.Before.Add(o.Before), s.After.Add(o.After)
	for k, n := range o.Books {
		if s.Books == nil {
			s.Books = map[string]int64{}
		}
		s.Books[k] += n
	}
	s.Currency = cmp.Or(s.Currency, o.Currency)
}

// DryRerate computes what RerateRangeArgs a would change, writing nothing,
// in one read-only snapshot of db. It refuses what the job would refuse:
// an invoiced period (ErrPeriodLocked), a book that does not apply
// (ErrPriceBookMismatch).
func DryRerate(ctx context.Context, db *pgxpool.Pool, a RerateRangeArgs) (RerateSummary, error) {
	if err := a.Validate(); err != nil {
		return RerateSummary{}, err
	}
	sum := RerateSummary{Tenant: a.Tenant, From: a.From.UTC(), To: a.To.UTC(), Period: a.Period, Model: a.Model, DryRun: true}
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := CheckTenant(ctx, tx, a.Tenant); err != nil {
			return err
		}
		if err := checkRerateBook(ctx, tx, a); err != nil {
			return err
		}
		if err := checkRangeOpen(ctx, tx, a); err != nil {
			return err
		}
		after := ""
		for {
			us, err := rangeUsages(ctx, tx, a, after)
			if err != nil || len(us) == 0 {
				return err
			}
			s, err := rerateTx(ctx, tx, us, a.PriceBookID, "", 0, true)
			if err != nil {
				return err
			}
			sum.add(s)
			after = us[len(us)-1].JobID
		}
	})
	return sum, err
}

// checkRerateBook refuses, whatever the records, a book that is not
// stored, or that is another tenant's or another model's than a asks to
// re-rate (ErrPriceBookMismatch).
func checkRerateBook(ctx context.Context, db DB, a RerateRangeArgs) error {
	if a.PriceBookID == 0 {
		return nil
	}
	pb, err := GetPriceBook(ctx, db, a.PriceBookID)
	if err != nil {
		return err
	}
	if pb.Tenant != "" && pb.Tenant != a.Tenant {
		return fmt.Errorf("%w: %s (%s) is tenant %s's, not %s's", ErrPriceBookMismatch, pb.Name(), pb.Scope(), pb.Tenant, a.Tenant)
	}
	if pb.Model != "" && a.Model != "" && pb.Model != a.Model {
		return fmt.Errorf("%w: %s (%s) prices model %s, not %s", ErrPriceBookMismatch, pb.Name(), pb.Scope(), pb.Model, a.Model)
	}
	return nil
}

// checkRangeOpen refuses a re-rating that touches an invoiced period: a
// month of the range's created_at, or the period of a charge of the range
// (a late charge placed in a later month); for a re-rating by billing
// month, that month.
func checkRangeOpen(ctx context.Context, tx pgx.Tx, a RerateRangeArgs) error {
	if a.Period != "" {
		m, err := ParsePeriod(a.Period)
		if err != nil {
			return err
		}
		number, err := ClosedBy(ctx, tx, a.Tenant, m)
		if err != nil {
			return err
		}
		if number != "" {
			return fmt.Errorf("%w: %s of %s is invoiced (%s); re-rate an open period, or add a credit or adjustment to the next one",
				ErrPeriodLocked, a.Period, a.Tenant, number)
		}
		return nil
	}
	rows, err := tx.Query(ctx, `
		SELECT i.number, to_char(i.period, 'YYYY-MM') FROM invoices i
		WHERE i.tenant_id = $1 AND (
			((i.period::timestamp AT TIME ZONE 'UTC') + interval '1 month' > $2 AND (i.period::timestamp AT TIME ZONE 'UTC') < $3)
			OR EXISTS (SELECT 1 FROM charges c JOIN usage u USING (tenant_id, job_id)
				WHERE c.tenant_id = $1 AND c.period = i.period AND u.created_at >= $2 AND u.created_at < $3
				  AND ($4 = '' OR u.model = $4)))
		ORDER BY i.period LIMIT 1`, a.Tenant, a.From, a.To, a.Model)
	if err != nil {
		return fmt.Errorf("billing: look up the invoices of %s: %w", a.Tenant, err)
	}
	var number, period string
	found := false
	if _, err := pgx.ForEachRow(rows, []any{&number, &period}, func() error { found = true; return nil }); err != nil {
		return fmt.Errorf("billing: look up the invoices of %s: %w", a.Tenant, err)
	}
	if found {
		return fmt.Errorf("%w: %s of %s is invoiced (%s); re-rate an open period, or add a credit or adjustment to the next one",
			ErrPeriodLocked, period, a.Tenant, number)
	}
	return nil
}

// rangeUsages reads up to rerateChunk of a's records with job ids after
// after, in job id order.
func rangeUsages(ctx context.Context, db DB, a RerateRangeArgs, after string) ([]contracts.Usage, error) {
	var rows pgx.Rows
	var err error
	if a.Period != "" {
		rows, err = db.Query(ctx, `
			SELECT u.raw FROM usage u JOIN charges c USING (tenant_id, job_id)
			WHERE u.tenant_id = $1 AND c.period = $2::date AND ($3 = '' OR u.model = $3) AND u.job_id > $4
			ORDER BY u.job_id LIMIT $5`, a.Tenant, a.Period+"-01", a.Model, after, rerateChunk)
	} else {
		rows, err = db.Query(ctx, `
			SELECT raw FROM usage
			WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3 AND ($4 = '' OR model = $4) AND job_id > $5
			ORDER BY job_id LIMIT $6`, a.Tenant, a.From, a.To, a.Model, after, rerateChunk)
	}
	if err != nil {
		return nil, fmt.Errorf("billing: read usage to re-rate: %w", err)
	}
	us, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (contracts.Usage, error) {
		var u contracts.Usage
		err := row.Scan(&u)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: read usage to re-rate: %w", err)
	}
	return us, nil
}

// rerateTx prices us (records of one tenant) again within tx, with book
// bookID or, when 0, each one's book in force, and (unless dry) replaces
// each charge that changed, keeping the previous one in charge_history
// with by, and charges the records that had none. It refuses records
// whose charge is in an invoiced period (ErrPeriodLocked) and a book that
// does not apply to one (ErrPriceBookMismatch); a record no book prices
// gets ErrNoPriceBook.
func rerateTx(ctx context.Context, tx pgx.Tx, us []contracts.Usage, bookID int64, by string, rollupDelay time.Duration, dry bool) (RerateSummary, error) {
	var sum RerateSummary
	old, err := chargesOf(ctx, tx, us)
	if err != nil {
		return sum, err
	}
	var fresh []Charge
	if bookID != 0 {
		pb, err := GetPriceBook(ctx, tx, bookID)
		if err != nil {
			return sum, err
		}
		tenants := make([]string, len(us))
		for i, u := range us {
			if !appliesTo(pb, u.Tenant, u.Model) {
				return sum, fmt.Errorf("%w: %s (%s) for job %s of tenant %s, model %s",
					ErrPriceBookMismatch, pb.Name(), pb.Scope(), u.JobID, u.Tenant, u.Model)
			}
			tenants[i] = u.Tenant
		}
		rules, err := loadTagRules(ctx, tx, slices.Compact(slices.Sorted(slices.Values(tenants))))
		if err != nil {
			return sum, fmt.Errorf("billing: load tag rules: %w", err)
		}
		for _, u := range us {
			fresh = append(fresh, newCharge(u, pb, rules[u.Tenant]))
		}
	} else {
		cs, err := priceMany(ctx, tx, us)
		if err != nil {
			return sum, err
		}
		for i, c := range cs {
			if c == nil {
				return sum, noPriceBook(us[i].Tenant, us[i].Model, us[i].CreatedAt)
			}
			fresh = append(fresh, *c)
		}
	}

	// Where each charge goes: an existing one stays in its period, which
	// must be open; a new one is placed as a rating would place it.
	var periods [][2]string
	var keys []periodKey
	for i, u := range us {
		if o := old[i]; o != nil {
			periods = append(periods, [2]string{u.Tenant, o.Period})
			fresh[i].Period, fresh[i].Note = o.Period, o.Note
		} else {
			keys = append(keys, periodKey{u.Tenant, MonthOf(u.CreatedAt)})
		}
	}
	if err := lockOpenPeriods(ctx, tx, periods); err != nil {
		return sum, err
	}
	if len(keys) > 0 {
		places, err := placeCharges(ctx, tx, keys)
		if err != nil {
			return sum, err
		}
		for i, u := range us {
			if old[i] == nil {
				p := places[periodKey{u.Tenant, MonthOf(u.CreatedAt)}]
				fresh[i].Period, fresh[i].Note = PeriodName(p.Period), p.Note
			}
		}
	}

	var changed, added []Charge
	var touched []contracts.Usage
	for i, c := range fresh {
		sum.Jobs++
		sum.After = sum.After.Add(c.Cost)
		sum.Currency = cmp.Or(sum.Currency, c.Currency)
		o := old[i]
		if o == nil {
			sum.New++
			added, touched = append(added, c), append(touched, us[i])
			continue
		}
		sum.Before = sum.Before.Add(o.Cost)
		if o.PriceBookID == c.PriceBookID && o.Currency == c.Currency && o.Cost.Equal(c.Cost) && slices.Equal(o.Tags, c.Tags) &&
			o.Multiplier.Equal(c.Multiplier) {
			continue
		}
		sum.Changed++
		if sum.Books == nil {
			sum.Books = map[string]int64{}
		}
		sum.Books[fmt.Sprintf("pb%d → pb%d", o.PriceBookID, c.PriceBookID)]++
		changed, touched = append(changed, c), append(touched, us[i])
	}
	if dry || len(touched) == 0 {
		return sum, nil
	}
	if len(added) > 0 {
		if _, err := insertCharges(ctx, tx, added); err != nil {
			return sum, err
		}
	}
	if err := replaceCharges(ctx, tx, changed, by); err != nil {
		return sum, err
	}
	return sum, noteCharges(ctx, tx, touched, rollupDelay)
}

// chargesOf reads the charges of us, nil where a record has none.
func chargesOf(ctx context.Context, db DB, us []contracts.Usage) ([]*Charge, error) {
	tenants, ids := make([]string, len(us)), make([]string, len(us))
	at := make(map[JobRef]int, len(us))
	for i, u := range us {
		tenants[i], ids[i] = u.Tenant, u.JobID
		at[JobRef{u.Tenant, u.JobID}] = i
	}
	rows, err := db.Query(ctx, `SELECT `+chargeColumns+` FROM charges
		WHERE (tenant_id, job_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, tenants, ids)
	if err != nil {
		return nil, fmt.Errorf("billing: read %d charges: %w", len(us), err)
	}
	out := make([]*Charge, len(us))
	var c Charge
	if _, err := pgx.ForEachRow(rows, c.dest(), func() error {
		cc := c
		out[at[JobRef{c.Tenant, c.JobID}]] = &cc
		return nil
	}); err != nil {
		return nil, fmt.Errorf("billing: read %d charges: %w", len(us), err)
	}
	return out, nil
}

// replaceCharges moves the charges of cs's jobs to charge_history (noting
// by) and stores cs in their place, each revision one higher, with two
// statements.
func replaceCharges(ctx context.Context, tx pgx.Tx, cs []Charge, by string) error {
	if len(cs) == 0 {
		return nil
	}
	slices.SortFunc(cs, func(a, b Charge) int {
		return compareKeys([2]string{a.Tenant, a.JobID}, [2]string{b.Tenant, b.JobID})
	})
	n := len(cs)
	a := chargeArraysOf(cs)
	if _, err := tx.Exec(ctx, `
		INSERT INTO charge_history (tenant_id, job_id, revision, price_book_id, price_book_version, currency,
			cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total, multiplier, period, note, tags,
			rated_at, replaced_by)
		SELECT tenant_id, job_id, revision, price_book_id, price_book_version, currency,
			cost_input, cost_cached_input, cost_embedding_input, cost_output, cost_ttft, cost_tool, total, multiplier, period, note, tags,
			rated_at, $3
		FROM charges WHERE (tenant_id, job_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
		ORDER BY tenant_id, job_id`, a.tenants, a.jobIDs, by); err != nil {
		return fmt.Errorf("billing: keep %d previous charges: %w", n, err)
	}
	if _, err := tx.Exec(ctx, `
		UPDATE charges c SET
			price_book_id = n.book_id, price_book_version = n.version::integer, currency = n.currency,
			cost_input = n.cost_input::numeric, cost_cached_input = n.cost_cached_input::numeric,
			cost_embedding_input = n.cost_embedding_input::numeric,
			cost_output = n.cost_output::numeric, cost_ttft = n.cost_ttft::numeric, cost_tool = n.cost_tool::numeric,
			total = n.total::numeric, multiplier = n.multiplier::numeric, tags = string_to_array(n.tags, ','),
			revision = c.revision + 1, rated_at = now()
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[])
			AS n(tenant_id, job_id, book_id, version, currency, cost_input, cost_cached_input, cost_embedding_input, cost_output,
				cost_ttft, cost_tool, total, multiplier, tags)
		WHERE c.tenant_id = n.tenant_id AND c.job_id = n.job_id`,
		a.tenants, a.jobIDs, a.bookIDs, a.versions, a.currencies, a.costs[0], a.costs[1], a.costs[2], a.costs[3], a.costs[4], a.costs[5],
		a.costs[6], a.costs[7], a.tags); err != nil {
		return fmt.Errorf("billing: store %d re-rated charges: %w", n, err)
	}
	return nil
}

// rerateWorker prices one job again (RerateArgs).
type rerateWorker struct {
	river.WorkerDefaults[RerateArgs]
	db          *pgxpool.Pool
	rollupDelay time.Duration
}

func (w *rerateWorker) Work(ctx context.Context, job *river.Job[RerateArgs]) error {
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		u, err := GetUsage(ctx, tx, job.Args.Tenant, job.Args.JobID)
		if err != nil {
			return cancelIfFinal(err)
		}
		if _, err := rerateTx(ctx, tx, []contracts.Usage{u}, job.Args.PriceBookID, fmt.Sprintf("rerate job %d", job.ID), w.rollupDelay, false); err != nil {
			return cancelIfFinal(err)
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// cancelIfFinal turns the errors no retry can mend (a record or book not
// stored, a book that does not apply, an invoiced period) into a River
// cancellation; the others are retried.
func cancelIfFinal(err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrPriceBookMismatch) || errors.Is(err, ErrPeriodLocked) {
		return river.JobCancel(err)
	}
	return err
}

// rerateRangeWorker works RerateRangeArgs.
type rerateRangeWorker struct {
	river.WorkerDefaults[RerateRangeArgs]
	db          *pgxpool.Pool
	rollupDelay time.Duration
}

// Timeout lets a long range run: each transaction is short, the job long.
func (w *rerateRangeWorker) Timeout(*river.Job[RerateRangeArgs]) time.Duration { return time.Hour }

func (w *rerateRangeWorker) Work(ctx context.Context, job *river.Job[RerateRangeArgs]) error {
	a := job.Args
	if err := a.Validate(); err != nil {
		return river.JobCancel(err)
	}
	sum := RerateSummary{Tenant: a.Tenant, From: a.From.UTC(), To: a.To.UTC(), Period: a.Period, Model: a.Model}
	by := cmp.Or(a.By, "unknown") + fmt.Sprintf(" (rerate job %d)", job.ID)
	if err := pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		if err := checkRerateBook(ctx, tx, a); err != nil {
			return err
		}
		return checkRangeOpen(ctx, tx, a)
	}); err != nil {
		return cancelIfFinal(err)
	}
	after := ""
	for {
		var us []contracts.Usage
		err := pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
			var err error
			if us, err = rangeUsages(ctx, tx, a, after); err != nil || len(us) == 0 {
				return err
			}
			s, err := rerateTx(ctx, tx, us, a.PriceBookID, by, w.rollupDelay, false)
			if err == nil {
				sum.add(s)
			}
			return err
		})
		if err != nil {
			return cancelIfFinal(err)
		}
		if len(us) == 0 {
			break
		}
		after = us[len(us)-1].JobID
	}
	return river.RecordOutput(ctx, sum)
}

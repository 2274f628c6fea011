package finance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/internal/ledgertest"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

func date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func TestEffectivePriceBook(t *testing.T) {
	t.Parallel()
	pool := ledgertest.Setup(t).Pool
	ctx := t.Context()
	create := func(pb price.Book) price.Book {
		t.Helper()
		pb.Currency = "USD"
		pb.PIn, pb.POut, pb.PTTFT, pb.PTool = dec("1"), dec("2"), dec("3"), dec("4")
		got, err := CreatePriceBook(ctx, pool, pb)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	acmeV1 := create(price.Book{Tenant: "acme", EffectiveAt: date(2026, 1, 1)})
	acmeV2 := create(price.Book{Tenant: "acme", EffectiveAt: date(2026, 6, 1)})
	acmeM2 := create(price.Book{Tenant: "acme", Model: "m2", EffectiveAt: date(2026, 2, 1)})
	defaultM3 := create(price.Book{Model: "m3", EffectiveAt: date(2026, 1, 1)})
	if acmeV1.Version != 1 || acmeV2.Version != 2 || acmeM2.Version != 1 || defaultM3.Version != 1 {
		t.Fatalf("versions %d %d %d %d", acmeV1.Version, acmeV2.Version, acmeM2.Version, defaultM3.Version)
	}
	seeded, err := ledger.EffectivePriceBook(ctx, pool, "nobody", "m1", date(2026, 3, 1))
	if err != nil {
		t.Fatal(err)
	}
	def := price.DefaultBook()
	if seeded.Tenant != "" || seeded.Model != "" || seeded.Version != 1 || !seeded.PIn.Equal(def.PIn) || !seeded.PTool.Equal(def.PTool) || !seeded.EffectiveAt.Equal(def.EffectiveAt) {
		t.Fatalf("seeded default book %+v", seeded)
	}

	for _, tc := range []struct {
		tenant, model string
		at            time.Time
		want          int64
	}{
		{"acme", "m1", date(2025, 12, 31), seeded.ID},                     // before acme's first book
		{"acme", "m1", date(2026, 1, 1), acmeV1.ID},                       // at its effective time
		{"acme", "m1", date(2026, 5, 31), acmeV1.ID},                      // v2 not yet in force
		{"acme", "m1", date(2026, 6, 1), acmeV2.ID},                       // v2 from then on
		{"acme", "m2", date(2026, 1, 15), acmeV1.ID},                      // the model's book not yet in force
		{"acme", "m2", date(2026, 7, 1), acmeM2.ID},                       // tenant+model beats tenant-any-model
		{"acme", "m3", date(2026, 7, 1), acmeV2.ID},                       // tenant-any-model beats default+model
		{"beta", "m3", date(2026, 7, 1), defaultM3.ID},                    // default+model beats default
		{"beta", "m1", date(2026, 7, 1), seeded.ID},                       // the default book
		{"beta", "m3", date(2025, 7, 1), seeded.ID},                       // default+model not yet in force
		{"acme", "m1", date(2026, 6, 1).Add(-time.Nanosecond), acmeV1.ID}, // just before v2
	} {
		got, err := ledger.EffectivePriceBook(ctx, pool, tc.tenant, tc.model, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != tc.want {
			t.Errorf("%s/%s at %s: book %d (%s/%s v%d), want %d", tc.tenant, tc.model, tc.at, got.ID, got.Tenant, got.Model, got.Version, tc.want)
		}
	}
	if _, err := ledger.EffectivePriceBook(ctx, pool, "acme", "m1", date(1969, 1, 1)); !errors.Is(err, ledger.ErrNoPriceBook) {
		t.Errorf("before every book: %v, want ErrNoPriceBook", err)
	}
	for _, bad := range []price.Book{
		{Currency: "usd", EffectiveAt: date(2026, 1, 1)},
		{Currency: "USD"},
		{Currency: "USD", EffectiveAt: date(2026, 1, 1), PIn: dec("-1")},
		{Tenant: "a b", Currency: "USD", EffectiveAt: date(2026, 1, 1)},
	} {
		if _, err := CreatePriceBook(ctx, pool, bad); !errors.Is(err, price.ErrInvalidBook) {
			t.Errorf("CreatePriceBook(%+v): %v", bad, err)
		}
	}
	if _, err := ledger.GetPriceBook(ctx, pool, 424242); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetPriceBook: %v", err)
	}
}

// waitJob waits for a River job to reach a final state and returns it.
func waitJob(t *testing.T, b *ledgertest.Bundle, id int64) *rivertype.JobRow {
	t.Helper()
	var row *rivertype.JobRow
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		var err error
		row, err = b.River.JobGet(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		return row.FinalizedAt != nil, fmt.Sprintf("job %d is %s (errors %v)", id, row.State, row.Errors)
	})
	return row
}

func TestPriceBookVersionsAndRerate(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	v1, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "acme", EffectiveAt: date(2026, 1, 1), Currency: "USD",
		PIn: dec("0.00001"), POut: dec("0.00003"), PTTFT: dec("0.000001"), PTool: dec("0.000002")})
	if err != nil {
		t.Fatal(err)
	}
	// Usage before and after a new version takes effect.
	early := billtest.Usage("early", "acme", "m1", date(2026, 3, 15), 1000, 200, 40, 2.5, 0.9)
	b.Store(t, early)
	b.WaitCharged(t, 1)

	v2, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "acme", EffectiveAt: date(2026, 6, 1), Currency: "USD",
		PIn: dec("0.00002"), POut: dec("0.00004"), PTTFT: dec("0.0000005"), PTool: dec("0"), Note: "summer prices"})
	if err != nil {
		t.Fatal(err)
	}
	late := billtest.Usage("late", "acme", "m1", date(2026, 7, 1), 1000, 200, 40, 2.5, 0.9)
	other := billtest.Usage("other", "beta", "m1", date(2026, 7, 1), 1000, 200, 40, 2.5, 0.9)
	b.Store(t, late)
	b.Store(t, other)
	b.WaitCharged(t, 3)

	check := func(u contracts.Usage, book price.Book, revision int, want price.Breakdown) {
		t.Helper()
		c, err := ledger.GetCharge(ctx, b.Pool, u.Tenant, u.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if c.PriceBookID != book.ID || c.PriceBookVersion != book.Version || c.Revision != revision || !c.Cost.Equal(want) {
			t.Errorf("%s: charge book %d v%d rev %d cost %+v\nwant book %d v%d rev %d cost %+v",
				u.JobID, c.PriceBookID, c.PriceBookVersion, c.Revision, c.Cost, book.ID, book.Version, revision, want)
		}
	}
	// 500 uncached and 500 cached input tokens, none priced apart: 1000 × 0.00001 + 200 × 0.00003 + 40 × 0.000001 + 2.5 × 0.000002 = 0.01 + 0.006 + 0.00004 + 0.000005
	check(early, v1, 1, price.Breakdown{Input: dec("0.005"), CachedInput: dec("0.005"), Output: dec("0.006"), TTFT: dec("0.00004"), Tool: dec("0.000005"), Total: dec("0.016045")})
	// 1000 × 0.00002 + 200 × 0.00004 + 40 × 0.0000005 + 2.5 × 0 = 0.02 + 0.008 + 0.00002
	check(late, v2, 1, price.Breakdown{Input: dec("0.01"), CachedInput: dec("0.01"), Output: dec("0.008"), TTFT: dec("0.00002"), Tool: dec("0"), Total: dec("0.02802")})
	seeded, err := ledger.EffectivePriceBook(ctx, b.Pool, "beta", "m1", other.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	check(other, seeded, 1, billtest.DefaultHandCost(other))

	// Re-rate the early job under v2 explicitly.
	res, err := b.River.Insert(ctx, ledger.RerateArgs{Tenant: "acme", JobID: "early", PriceBookID: v2.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if row := waitJob(t, b, res.Job.ID); row.State != rivertype.JobStateCompleted {
		t.Fatalf("rerate job %s: %v", row.State, row.Errors)
	}
	check(early, v2, 2, price.Breakdown{Input: dec("0.01"), CachedInput: dec("0.01"), Output: dec("0.008"), TTFT: dec("0.00002"), Tool: dec("0"), Total: dec("0.02802")})

	// A retroactive correction: v3 effective from March; re-rating by
	// lookup picks it for the early job.
	v3, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "acme", EffectiveAt: date(2026, 3, 1), Currency: "USD",
		PIn: dec("0.000005"), POut: dec("0.00001"), PTTFT: dec("0"), PTool: dec("0.0000001"), Note: "March correction"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = b.River.Insert(ctx, ledger.RerateArgs{Tenant: "acme", JobID: "early"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, b, res.Job.ID)
	// 1000 × 0.000005 + 200 × 0.00001 + 0 + 2.5 × 0.0000001 = 0.005 + 0.002 + 0.00000025
	check(early, v3, 3, price.Breakdown{Input: dec("0.0025"), CachedInput: dec("0.0025"), Output: dec("0.002"), TTFT: dec("0"), Tool: dec("0.00000025"), Total: dec("0.00700025")})
	// The late job still uses v2: v3 is in force from March but v2 from June.
	check(late, v2, 1, price.Breakdown{Input: dec("0.01"), CachedInput: dec("0.01"), Output: dec("0.008"), TTFT: dec("0.00002"), Tool: dec("0"), Total: dec("0.02802")})

	// Both previous charges of the early job are kept.
	if hist := chargeHistory(t, b, "job_id = 'early'"); fmt.Sprint(hist) != "[acme/early r1 v1 0.016045 acme/early r2 v2 0.02802]" {
		t.Errorf("charge history %v", hist)
	}

	// A book of another tenant cannot re-rate beta's job: the job is
	// cancelled and the charge left alone.
	res, err = b.River.Insert(ctx, ledger.RerateArgs{Tenant: "beta", JobID: "other", PriceBookID: v1.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if row := waitJob(t, b, res.Job.ID); row.State != rivertype.JobStateCancelled {
		t.Errorf("mismatched rerate ended %s", row.State)
	}
	check(other, seeded, 1, billtest.DefaultHandCost(other))

	// The rollup of the early job's day follows the re-ratings.
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		totals, err := ledger.DailyTotals(ctx, b.Pool, "acme", "2026-03-15", "2026-03-16")
		if err != nil {
			return false, err.Error()
		}
		return len(totals) == 1 && totals[0].Cost.Total.Equal(dec("0.00700025")), fmt.Sprintf("%+v", totals)
	})
}

// TestRerateSameJobIDTwoTenants: a re-rating names the tenant's job, and
// leaves another tenant's job of the same id alone.
func TestRerateSameJobIDTwoTenants(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	acme := billtest.Usage("shared", "acme", "m1", date(2026, 3, 15), 1000, 200, 40, 2.5, 0.9)
	beta := billtest.Usage("shared", "beta", "m1", date(2026, 3, 15), 10, 20, 4, 0, 0.9)
	b.Store(t, acme)
	b.Store(t, beta)
	b.Store(t, acme) // again: stored and rated once
	b.WaitCharged(t, 2)
	book, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "acme", EffectiveAt: date(2026, 1, 1), Currency: "USD",
		PIn: dec("0.00001"), POut: dec("0.00003"), PTTFT: dec("0.000001"), PTool: dec("0.000002")})
	if err != nil {
		t.Fatal(err)
	}
	seeded, err := ledger.EffectivePriceBook(ctx, b.Pool, "beta", "m1", beta.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	rerate := func(args ledger.RerateArgs, want rivertype.JobState) {
		t.Helper()
		res, err := b.River.Insert(ctx, args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if row := waitJob(t, b, res.Job.ID); row.State != want {
			t.Errorf("rerate %+v ended %s, want %s (errors %v)", args, row.State, want, row.Errors)
		}
	}
	rerate(ledger.RerateArgs{Tenant: "acme", JobID: "shared"}, rivertype.JobStateCompleted)
	// acme's book for beta's job, and a tenant without the job: nothing to do.
	rerate(ledger.RerateArgs{Tenant: "beta", JobID: "shared", PriceBookID: book.ID}, rivertype.JobStateCancelled)
	rerate(ledger.RerateArgs{Tenant: "gamma", JobID: "shared"}, rivertype.JobStateCancelled)

	for _, tc := range []struct {
		u        contracts.Usage
		book     int64
		revision int
		want     price.Breakdown
	}{
		{acme, book.ID, 2, billtest.HandCost(acme, "0.00001", "0.00003", "0.000001", "0.000002")},
		{beta, seeded.ID, 1, billtest.DefaultHandCost(beta)},
	} {
		c, err := ledger.GetCharge(ctx, b.Pool, tc.u.Tenant, "shared")
		if err != nil {
			t.Fatal(err)
		}
		if c.Tenant != tc.u.Tenant || c.PriceBookID != tc.book || c.Revision != tc.revision || !c.Cost.Equal(tc.want) {
			t.Errorf("%s: charge %+v, want book %d revision %d cost %+v", tc.u.Tenant, c, tc.book, tc.revision, tc.want)
		}
	}
	// Only acme's charge was replaced.
	hist := chargeHistory(t, b, "job_id = 'shared'")
	if want := fmt.Sprintf("[acme/shared r1 v1 %s]", billtest.DefaultHandCost(acme).Total); fmt.Sprint(hist) != want {
		t.Errorf("charge history %v, want %s", hist, want)
	}
}

// chargeHistory returns the charge_history rows matching where, by tenant,
// job and revision, each as "tenant/job rREVISION vVERSION total".
func chargeHistory(t *testing.T, b *ledgertest.Bundle, where string) []string {
	t.Helper()
	rows, err := b.Pool.Query(t.Context(), `SELECT tenant_id || '/' || job_id, revision, price_book_version, total::text
		FROM charge_history WHERE `+where+` ORDER BY tenant_id, job_id, revision`)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var job, total string
		var rev, ver int
		err := row.Scan(&job, &rev, &ver, &total)
		return fmt.Sprintf("%s r%d v%d %s", job, rev, ver, total), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hist
}

func TestRateWithoutPriceBookRetries(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	if _, err := b.Pool.Exec(ctx, `DELETE FROM price_books`); err != nil {
		t.Fatal(err)
	}
	b.Store(t, billtest.Usage("orphan", "acme", "m1", date(2026, 3, 1), 1, 1, 1, 1, 0.5))
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		jobs, err := b.River.JobList(ctx, river.NewJobListParams().Kinds(ledger.RateArgs{}.Kind()))
		if err != nil {
			return false, err.Error()
		}
		if len(jobs.Jobs) != 1 || len(jobs.Jobs[0].Errors) == 0 {
			return false, "no failed attempt yet"
		}
		j := jobs.Jobs[0]
		return j.State == rivertype.JobStateRetryable && strings.Contains(j.Errors[0].Error, ledger.ErrNoPriceBook.Error()),
			fmt.Sprintf("%s: %+v", j.State, j.Errors)
	})
	if _, err := ledger.GetCharge(ctx, b.Pool, "acme", "orphan"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("charge without a price book: %v", err)
	}
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// runOK runs a command line with --database-url db and fails the test
// unless it exits 0; it returns stdout and stderr.
func runOK(t *testing.T, db string, args ...string) (out, errOut string) {
	t.Helper()
	code, out, errOut := runCLI(append(args, "--database-url", db)...)
	if code != 0 {
		t.Fatalf("%v: status %d, stderr %q", args, code, errOut)
	}
	return out, errOut
}

// decodeJSON decodes out into a T, failing the test on an error.
func decodeJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return v
}

// TestPriceBookCreateCopies: a tenant book given only --output copies
// every other coefficient from the default book in force; the table and
// JSON show it, named pbN with its scope.
func TestPriceBookCreateCopies(t *testing.T) {
	db := schemaURL(t, dbtest.Pool(t))
	out, errOut := runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2026-11-15", "--output", "0.00002", "--note", "output up")
	for _, want := range []string{"NAME          pb2", "SCOPE         acme/any model v1", "TENANT        acme", "MODEL         any",
		"FROM          2026-11-15T00:00:00Z", "TO            open", "CURRENCY      USD", "INPUT         0.000003",
		"CACHED INPUT  = input", "OUTPUT        0.00002", "TTFT/MS       0.0000002", "TOOL/MS       0.0000001", "HIGH×         1", "NOTE          output up"} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	if want := "input, ttft, tool, cached-input, embedding-input, priority-high, priority-normal, priority-low, batch copied from pb1 (default/any model v1)"; !strings.Contains(errOut, want) {
		t.Errorf("create stderr %q lacks %q", errOut, want)
	}
	out, _ = runOK(t, db, "pricebook", "show", "pb2", "--format", "json")
	pb := decodeJSON[priceBookJSON](t, out)
	d := decimal.RequireFromString
	if pb.Name != "pb2" || pb.Scope != "acme/any model v1" || pb.Tenant != "acme" || pb.Version != 1 || pb.Currency != "USD" ||
		!pb.PIn.Equal(d("0.000003")) || !pb.POut.Equal(d("0.00002")) || !pb.PTTFT.Equal(d("0.0000002")) || !pb.PTool.Equal(d("0.0000001")) ||
		pb.PCachedIn != nil || !pb.MultHigh.Equal(d("1")) || !pb.MultBatch.Equal(d("1")) || pb.EffectiveTo != nil ||
		!pb.EffectiveAt.Equal(time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("show pb2: %+v", pb)
	}
	// "7" is "pb7"; a later version copies from the tenant's own book.
	out, _ = runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2026-12-01T12:00:00+01:00",
		"--cached-input", "0.000001", "--embedding-input", "0.00000002", "--priority-high", "1.5", "--batch", "0.5", "--format", "json")
	pb = decodeJSON[priceBookJSON](t, out)
	if pb.Name != "pb3" || pb.Version != 2 || !pb.POut.Equal(d("0.00002")) || pb.PCachedIn == nil || !pb.PCachedIn.Equal(d("0.000001")) ||
		pb.PEmbedIn == nil || !pb.PEmbedIn.Equal(d("0.00000002")) ||
		!pb.MultHigh.Equal(d("1.5")) || !pb.MultBatch.Equal(d("0.5")) || !pb.MultLow.Equal(d("1")) ||
		!pb.EffectiveAt.Equal(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("second version: %+v", pb)
	}
	if out, _ = runOK(t, db, "pricebook", "show", "3"); !strings.Contains(out, "acme/any model v2") || !strings.Contains(out, "EMBED INPUT   0.00000002") {
		t.Errorf("show 3:\n%s", out)
	}
	// A later version copies the embedding price, or drops it with none.
	out, errOut = runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2027-01-01", "--format", "json")
	if pb = decodeJSON[priceBookJSON](t, out); pb.PEmbedIn == nil || !pb.PEmbedIn.Equal(d("0.00000002")) || !strings.Contains(errOut, "embedding-input") {
		t.Errorf("copied embedding price: %+v (%s)", pb.PEmbedIn, errOut)
	}
	out, _ = runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2027-02-01", "--embedding-input", "none", "--format", "json")
	if pb = decodeJSON[priceBookJSON](t, out); pb.PEmbedIn != nil {
		t.Errorf("--embedding-input none: %+v", pb.PEmbedIn)
	}
}

// TestPriceBookList: names are unique across scopes (the default book and
// a tenant book, both version 1, are pb1 and pb2); --at picks the book in
// force in each scope before and after a mid-month change.
func TestPriceBookList(t *testing.T) {
	db := schemaURL(t, dbtest.Pool(t))
	runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2026-11-01", "--input", "0.000004")
	runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2026-11-15", "--input", "0.000005", "--note", "mid-month")
	runOK(t, db, "pricebook", "create", "--tenant", "beta", "--model", "tiny", "--effective-from", "2026-11-01", "--output", "0.00001")

	out, _ := runOK(t, db, "pricebook", "list")
	for _, want := range []string{
		"NAME  TENANT   MODEL  VERSION  FROM                  TO    CURRENCY  INPUT     CACHED INPUT  EMBED INPUT  OUTPUT    TTFT/MS    TOOL/MS    HIGH×  NORMAL×  LOW×  BATCH×  NOTE",
		"pb1   default  any    1        1970-01-01T00:00:00Z  open  USD       0.000003  = input       = input      0.000015",
		"pb2   acme     any    1        2026-11-01T00:00:00Z  open  USD       0.000004",
		"pb3   acme     any    2        2026-11-15T00:00:00Z  open  USD       0.000005",
		"mid-month",
		"pb4   beta     tiny   1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	names := func(args ...string) []string {
		t.Helper()
		out, _ := runOK(t, db, append([]string{"pricebook", "list", "--format", "json"}, args...)...)
		var ns []string
		for _, pb := range decodeJSON[[]priceBookJSON](t, out) {
			ns = append(ns, pb.Name+" "+pb.Scope)
		}
		return ns
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "pb1 default/any model v1,pb2 acme/any model v1,pb3 acme/any model v2,pb4 beta/tiny v1"},
		{[]string{"--tenant", "acme"}, "pb1 default/any model v1,pb2 acme/any model v1,pb3 acme/any model v2"},
		{[]string{"--tenant", "acme", "--at", "2026-11-10"}, "pb1 default/any model v1,pb2 acme/any model v1"},
		{[]string{"--tenant", "acme", "--at", "2026-11-14T23:59:59Z"}, "pb1 default/any model v1,pb2 acme/any model v1"},
		{[]string{"--tenant", "acme", "--at", "2026-11-15"}, "pb1 default/any model v1,pb3 acme/any model v2"},
		{[]string{"--tenant", "acme", "--at", "2026-11-20"}, "pb1 default/any model v1,pb3 acme/any model v2"},
		{[]string{"--tenant", "acme", "--at", "2026-10-01"}, "pb1 default/any model v1"},
		{[]string{"--model", "tiny"}, "pb1 default/any model v1,pb2 acme/any model v1,pb3 acme/any model v2,pb4 beta/tiny v1"},
		{[]string{"--tenant", "beta", "--model", "tiny", "--at", "2026-11-20"}, "pb1 default/any model v1,pb4 beta/tiny v1"},
	} {
		if got := strings.Join(names(tc.args...), ","); got != tc.want {
			t.Errorf("list %v: %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestPriceBookEnd: ending a tenant's book makes the default book price
// its usage from then on; the command says charges keep their book until
// re-rated.
func TestPriceBookEnd(t *testing.T) {
	pool := dbtest.Pool(t)
	db := schemaURL(t, pool)
	ctx := context.Background()
	runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2026-11-01", "--input", "0.000004")
	out, errOut := runOK(t, db, "pricebook", "end", "pb2", "--at", "2026-12-01")
	if !strings.Contains(out, "TO            2026-12-01T00:00:00Z") {
		t.Errorf("end output:\n%s", out)
	}
	for _, want := range []string{"pb2 (acme/any model v1) ends at 2026-12-01T00:00:00Z", "priced by pb1 (default/any model v1)",
		"keep their price book until re-rated with 'zerolayer rerate'"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("end stderr lacks %q: %s", want, errOut)
		}
	}
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC), 2},
		{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 1},
		{time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 1},
	} {
		pb, err := billingEffective(ctx, pool, "acme", "tiny", tc.at)
		if err != nil || pb != tc.want {
			t.Errorf("EffectivePriceBook at %s: pb%d, %v; want pb%d", tc.at, pb, err, tc.want)
		}
	}
	if code, _, errOut := runCLI("pricebook", "end", "2", "--at", "2026-12-15", "--database-url", db); code != 1 || !strings.Contains(errOut, "already ends") {
		t.Errorf("end twice: status %d, %q", code, errOut)
	}
}

// TestPriceBookInvalid: bad input exits non-zero with a message naming
// the problem, and creates nothing.
func TestPriceBookInvalid(t *testing.T) {
	db := schemaURL(t, dbtest.Pool(t))
	from := []string{"--effective-from", "2026-11-01"}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{append([]string{"create", "--input", "-0.1"}, from...), 2, `invalid value "-0.1" for flag -input: must not be negative`},
		{append([]string{"create", "--embedding-input", "-0.1"}, from...), 2, `invalid value "-0.1" for flag -embedding-input: must not be negative`},
		{append([]string{"create", "--output", "NaN"}, from...), 2, "want a decimal number"},
		{append([]string{"create", "--tool", ""}, from...), 2, "want a decimal number"},
		{append([]string{"create", "--priority-low", "0"}, from...), 2, "a multiplier must be more than 0"},
		{[]string{"create", "--input", "1"}, 2, "--effective-from is required"},
		{[]string{"create", "--effective-from", "1 Nov"}, 2, "neither a date"},
		{append([]string{"create", "--effective-to", "2026-10-01"}, from...), 2, "--effective-to 2026-10-01 is not after --effective-from 2026-11-01"},
		{append([]string{"create", "--effective-to", "2026-11-01"}, from...), 2, "is not after"},
		{append([]string{"create", "--tenant", "acme", "--currency", "EUR", "--output", "0.1"}, from...), 2,
			"--currency EUR is not the currency of pb1 (default/any model v1, USD), whose prices would be copied: give --input, --ttft, --tool too"},
		{append([]string{"create", "--currency", "dollars", "--input", "1", "--output", "1", "--ttft", "1", "--tool", "1", "--cached-input", "none"}, from...), 1, "not an ISO 4217 code"},
		{append([]string{"create", "--tenant", "Bad Tenant"}, from...), 1, "invalid price book"},
		{append([]string{"create", "--format", "csv"}, from...), 2, `--format "csv": want table or json`},
		{[]string{"show", "pb99"}, 1, "there is no price book pb99 (id 99)"},
		{[]string{"show", "99"}, 1, "there is no price book pb99"},
		{[]string{"show", "book7"}, 2, `"book7" is not a price book: want pbN or N`},
		{[]string{"show"}, 2, "give one price book"},
		{[]string{"show", "pb1", "pb2"}, 2, "give one price book"},
		{[]string{"end", "pb99", "--at", "2026-12-01"}, 1, "there is no price book pb99"},
		{[]string{"end", "pb1"}, 2, "--at is required"},
		{[]string{"end", "pb1", "--at", "1969-12-31"}, 1, "cannot end before that"},
		{[]string{"list", "--at", "soon"}, 2, "--at:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
	} {
		code, out, errOut := runCLI(append(append([]string{"pricebook"}, tt.args...), "--database-url", db)...)
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
	out, _ := runOK(t, db, "pricebook", "list", "--format", "json")
	if books := decodeJSON[[]priceBookJSON](t, out); len(books) != 1 {
		t.Errorf("invalid commands created books: %+v", books)
	}
	// With no book in force to copy from, every price is required.
	runOK(t, db, "pricebook", "end", "pb1", "--at", "2000-01-01")
	code, _, errOut := runCLI("pricebook", "create", "--tenant", "acme", "--output", "1", "--effective-from", "2026-11-01", "--database-url", db)
	if code != 2 || !strings.Contains(errOut, "no price book is in force for acme/any model at 2026-11-01T00:00:00Z to copy prices from: give --input, --ttft, --tool") {
		t.Errorf("create without a book in force: status %d, %q", code, errOut)
	}
	out, errOut = runOK(t, db, "pricebook", "create", "--tenant", "acme", "--effective-from", "2026-11-01",
		"--input", "1e-6", "--output", "0.000002", "--ttft", "0", "--tool", "0")
	if !strings.Contains(out, "INPUT         0.000001") || !strings.Contains(out, "CURRENCY      USD") || !strings.Contains(out, "LOW×          1") || errOut != "" {
		t.Errorf("create with every price:\n%s\nstderr %q", out, errOut)
	}
}

// billingEffective returns the id of the book EffectivePriceBook picks.
func billingEffective(ctx context.Context, pool *pgxpool.Pool, tenant, model string, at time.Time) (int64, error) {
	pb, err := ledger.EffectivePriceBook(ctx, pool, tenant, model, at)
	return pb.ID, err
}

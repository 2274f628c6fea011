package finance

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/internal/ledgertest"
	"github.com/zerolayer/zerolayer/billing/ledger"
)

// TestCloseWhileRating closes a month while its records are being stored
// and rated, many at once, and credits are added: the close neither
// deadlocks nor loses a charge. Every charge is billed once, in the month
// (on the invoice, whose subtotal is exactly those charges and the credits
// it took) or, rated after the close, in the next month with a note; a
// credit too late for the month is refused, not lost.
func TestCloseWhileRating(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	const n = 400
	month := date(2026, 10, 1)
	// One record first, so the tenant is known to the credits.
	b.Store(t, billtest.Usage("r-000", "acme", "m1", month.Add(time.Hour), 100, 20, 10, 0, 0.5))
	b.WaitCharged(t, 1)
	if err := SetSupplier(ctx, b.Pool, testSupplier, "test"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 1; i < n; i++ {
			b.Store(t, billtest.Usage(fmt.Sprintf("r-%03d", i), "acme", "m1", month.Add(time.Duration(i)*time.Minute), 100+i, 20, 10, 0, 0.5))
		}
	}()
	var credited []Credit
	go func() {
		defer wg.Done()
		for i := range 20 {
			c, err := AddCredit(ctx, b.Pool, Credit{Tenant: "acme", Period: "2026-10", Kind: LineCredit, Amount: decimal.RequireFromString("0.01"),
				Currency: "USD", Reason: fmt.Sprint("credit ", i), CreatedBy: "test"})
			if err == nil {
				credited = append(credited, c)
			} else if !errors.Is(err, ledger.ErrPeriodLocked) {
				t.Errorf("credit %d: %v", i, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(30 * time.Millisecond) // in the middle of it
	invs, err := CloseInvoice(ctx, b.Pool, CloseRequest{Tenant: "acme", Period: "2026-10", By: "test", AllowUnrated: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 1 {
		t.Fatalf("%d documents, want 1", len(invs))
	}
	inv := invs[0]
	wg.Wait()
	b.WaitCharged(t, n)

	var inMonth, next decimal.Decimal
	var nIn, nNext, noted int
	if err := b.Pool.QueryRow(ctx, `SELECT
			coalesce(sum(total) FILTER (WHERE period = '2026-10-01'), 0), count(*) FILTER (WHERE period = '2026-10-01'),
			coalesce(sum(total) FILTER (WHERE period = '2026-11-01'), 0), count(*) FILTER (WHERE period = '2026-11-01'),
			count(*) FILTER (WHERE period = '2026-11-01' AND note LIKE '%'||$1||'%')
		FROM charges WHERE tenant_id = 'acme'`, inv.Number).Scan(&inMonth, &nIn, &next, &nNext, &noted); err != nil {
		t.Fatal(err)
	}
	var credits decimal.Decimal
	var onInvoice int
	if err := b.Pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0), count(*) FROM credits WHERE invoice_id = $1`, inv.ID).Scan(&credits, &onInvoice); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d charges on %s, %d in the next month, %d of %d credits on the invoice", nIn, inv.Number, nNext, onInvoice, len(credited))
	if nIn+nNext != n || int64(nIn) != inv.Jobs || noted != nNext || !inv.Subtotal.Equal(inMonth.Add(credits)) || onInvoice != len(credited) {
		t.Errorf("invoice %s: %d jobs, subtotal %s; charges in the month %d (%s), next %d (%d noted), credits %s (%d on it, %d added)",
			inv.Number, inv.Jobs, inv.Subtotal, nIn, inMonth, nNext, noted, credits, onInvoice, len(credited))
	}
	if nNext == 0 || nIn <= 1 {
		t.Logf("the close did not land in the middle of the rating (%d in, %d after): the test proved less", nIn, nNext)
	}
}

// TestLegacyInvoiceReadable: an invoice issued before the tax rules
// (migration 0010 marks it tax_rule 'legacy': exact subtotal, tax and
// total, the amount due rounded once) reads back as it was printed then.
func TestLegacyInvoiceReadable(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	if err := ledger.EnsureTenant(ctx, b.Pool, "acme", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(ctx, `INSERT INTO invoices (number, tenant_id, period, currency, issued_at, due_at, customer, tax_rate,
			subtotal, tax, total, amount_due, jobs, closed_by, tax_rule)
		VALUES ('INV-2026-000001', 'acme', '2026-10-01', 'USD', '2026-11-01T00:00:00Z', '2026-12-01', '{"name":"Acme"}', 0.0825,
			0.0294, 0.00242550, 0.03182550, 0.03, 7, 'ops', 'legacy')`); err != nil {
		t.Fatal(err)
	}
	inv, err := GetInvoice(ctx, b.Pool, "INV-2026-000001")
	if err != nil {
		t.Fatal(err)
	}
	d := decimal.RequireFromString
	if inv.Kind != KindInvoice || !inv.Subtotal.Equal(d("0.0294")) || !inv.Total.Equal(d("0.0318255")) || !inv.SubtotalDisplay.Equal(d("0.03")) ||
		!inv.TaxDisplay.IsZero() || !inv.AmountDue.Equal(d("0.03")) || !inv.TotalDisplay.Equal(d("0.03")) || inv.Customer.Name != "Acme" {
		t.Errorf("legacy invoice read as %+v", inv)
	}
	if err := inv.Write(io.Discard, FormatPDF); err != nil {
		t.Errorf("a legacy invoice does not print: %v", err)
	}
}
